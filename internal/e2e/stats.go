//go:build e2e

package e2e

import (
	"slices"
	"time"
)

// Percentile is the nearest-rank p-th percentile of ds; 0 for none.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}
