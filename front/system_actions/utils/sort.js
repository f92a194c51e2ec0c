// Sorts `lines` (an array of strings); answers them with their count.
function main({ lines = [] }) {
  const sorted = [...lines].map(String).sort();
  return { lines: sorted, length: sorted.length };
}
