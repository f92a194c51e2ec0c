// The first `num` (default 1) of `lines`.
function main({ lines = [], num = 1 }) {
  return { lines: lines.slice(0, Math.max(0, Number(num) || 0)) };
}
