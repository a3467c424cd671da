package cli

import (
	"runtime/debug"
	"sync"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3"
// (make build, the image). A build without it says what it is from the
// Go build info instead (version).
var Version = ""

// version is what this binary is, read once.
var version = sync.OnceValue(func() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(Version, info)
})

// versionOf is the version a build states: the one set with -X; else the
// module version `go install ...@v1.2.3` records; else the commit `go
// build` in a checkout records, with "-dirty" for uncommitted changes;
// else "dev".
func versionOf(set string, info *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "dev-" + rev
}
