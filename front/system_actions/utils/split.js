// Splits `payload` (a string) by `separator` (default: a newline) into `lines`.
function main({ payload = "", separator = "\n" }) {
  return { lines: String(payload).split(separator) };
}
