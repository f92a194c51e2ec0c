// Joins `lines` into one `payload` string, a line each.
function main({ lines = [] }) {
  return { lines, payload: lines.map(String).join("\n") };
}
