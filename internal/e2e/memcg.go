//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// MemoryCgroup is a memory cgroup of its own with a limit, for a scaler
// process the benchmark runs as a container with that memory limit would
// run: what it holds beyond the limit is reclaimed (the executable's
// pages first) or, when that is not enough, the process is OOM-killed.
// It works with cgroup v1's memory controller and with cgroup v2.
type MemoryCgroup struct {
	dir string
	v2  bool
}

// NewMemoryCgroup makes a cgroup with limit bytes, removed at the end of
// the test; it fails the test where the machine lets it make none.
func NewMemoryCgroup(t *testing.T, limit int64) *MemoryCgroup {
	t.Helper()
	var roots []*MemoryCgroup
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		roots = append(roots, &MemoryCgroup{dir: "/sys/fs/cgroup/memory"})
	}
	if raw, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(raw), "memory") {
		roots = append(roots, &MemoryCgroup{dir: "/sys/fs/cgroup", v2: true})
	}
	require.NotEmpty(t, roots, "a memory limit needs a writable memory cgroup (v1 /sys/fs/cgroup/memory, or v2 with the memory controller)")
	dir, err := os.MkdirTemp(roots[0].dir, Uniq("gro-e2e")+"-")
	require.NoError(t, err, "make a memory cgroup")
	cg := &MemoryCgroup{dir: dir, v2: roots[0].v2}
	t.Cleanup(func() {
		if err := os.Remove(cg.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Logf("remove the memory cgroup %s: %v", cg.dir, err)
		}
	})
	if cg.v2 {
		require.NoError(t, cg.write("memory.max", limit))
		require.NoError(t, cg.write("memory.swap.max", 0))
	} else {
		require.NoError(t, cg.write("memory.limit_in_bytes", limit))
		// The few pages the process touched before it moved in go with
		// it, where the kernel can (not every kernel accepts it; they
		// are a few MiB at most either way).
		_ = cg.write("memory.move_charge_at_immigrate", 1)
	}
	return cg
}

func (c *MemoryCgroup) write(file string, v int64) error {
	return os.WriteFile(filepath.Join(c.dir, file), []byte(strconv.FormatInt(v, 10)), 0o644)
}

// join moves process pid into the cgroup.
func (c *MemoryCgroup) join(pid int) error {
	return c.write("cgroup.procs", int64(pid))
}

// Report is what the cgroup saw: the most it charged (anonymous memory
// and the page cache its process touched, the executable's pages among
// them), how often reclaim had to make room under the limit, and OOM
// kills.
func (c *MemoryCgroup) Report() string {
	read := func(file string) string {
		raw, err := os.ReadFile(filepath.Join(c.dir, file))
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(raw))
	}
	field := func(file, key string) string {
		for _, line := range strings.Split(read(file), "\n") {
			if v, ok := strings.CutPrefix(line, key+" "); ok {
				return v
			}
		}
		return "0"
	}
	mib := func(s string) string {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return s
		}
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	if c.v2 {
		return fmt.Sprintf("memcg peak=%s limit-hits=%s oom-kills=%s", mib(read("memory.peak")), field("memory.events", "max"), field("memory.events", "oom_kill"))
	}
	return fmt.Sprintf("memcg peak=%s limit-hits=%s oom-kills=%s", mib(read("memory.max_usage_in_bytes")), read("memory.failcnt"), field("memory.oom_control", "oom_kill"))
}
