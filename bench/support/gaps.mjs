// The gaps between consecutive committed steps, with the first tenth (module loading,
// JIT) left out and sorted, and a percentile of them.
export function stepGaps(marks, steps) {
  return marks
    .slice(1)
    .map((t, i) => t - marks[i])
    .slice(Math.floor(steps / 10))
    .sort((a, b) => a - b);
}

export function percentile(gaps, p) {
  return gaps[Math.min(gaps.length - 1, Math.floor((gaps.length * p) / 100))];
}
