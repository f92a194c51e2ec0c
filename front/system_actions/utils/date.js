// The current date and time (ISO 8601, UTC).
function main() {
  return { date: new Date().toISOString() };
}
