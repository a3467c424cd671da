package main

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const committed = "../../../policies/seccomp/rootless-dind.json"

// The committed profile is what this command writes: edit the command,
// then run make seccomp-profile.
func TestTheCommittedProfileIsGenerated(t *testing.T) {
	raw, err := os.ReadFile(committed)
	require.NoError(t, err)
	want, err := json.MarshalIndent(Profile(), "", "  ")
	require.NoError(t, err)
	assert.Equal(t, string(want)+"\n", string(raw), "run make seccomp-profile")
}

// allowed says whether the profile lets a process make call, with no
// condition on its arguments.
func allowed(p *specs.LinuxSeccomp, call string) bool {
	for _, s := range p.Syscalls {
		if s.Action == specs.ActAllow && len(s.Args) == 0 && slices.Contains(s.Names, call) {
			return true
		}
	}
	return false
}

// What rootlesskit and the runc inside the pod need is allowed, what
// no pod needs stays refused, and everything else too by default.
func TestTheProfileAllowsWhatTheRootlessDaemonNeeds(t *testing.T) {
	p := Profile()
	assert.Equal(t, specs.ActErrno, p.DefaultAction, "a call not listed is refused")
	for _, call := range []string{"unshare", "mount", "umount2", "setns", "pivot_root", "keyctl", "add_key", "request_key", "clone", "sethostname"} {
		assert.True(t, allowed(p, call), "%s is allowed", call)
	}
	for _, call := range []string{"init_module", "finit_module", "delete_module", "kexec_load", "reboot", "swapon", "acct", "iopl", "open_by_handle_at"} {
		assert.False(t, allowed(p, call), "%s stays refused", call)
	}
	assert.Contains(t, p.Architectures, specs.ArchX86_64)
	assert.Contains(t, p.Architectures, specs.ArchAARCH64)
}
