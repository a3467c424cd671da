// Command seccomp writes the Localhost seccomp profile that an
// unprivileged, user-namespaced runner pod's rootless Docker daemon needs
// (policies/seccomp/rootless-dind.json; make seccomp-profile).
//
// It is containerd's default profile (contrib/seccomp of the version in
// go.mod) as containerd builds it for a container that holds
// CAP_SYS_ADMIN, whose extra system calls (mount, unshare, clone of
// namespaces, setns, pivot_root's neighbours) rootlesskit and the runc
// inside the pod make in the user namespace they own, plus the keyring
// calls (add_key, keyctl, request_key: runc joins a session keyring) and
// pivot_root (runc jails each job container's root). The pod holds no
// added capability: what these calls may do is bounded by the pod's user
// namespace, where the kernel checks every one of them.
//
// The profile lists the x86 and Arm architectures, so one file serves
// amd64 and arm64 nodes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// defaultCapabilities are the capabilities containerd grants a container
// by default, and CAP_SYS_ADMIN, as a rootless daemon holds it in its own
// user namespace.
var defaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	"CAP_SYS_ADMIN",
}

// extra are the calls containerd's default leaves out even then.
var extra = []string{"add_key", "keyctl", "pivot_root", "request_key"}

// architectures are the node architectures the profile serves.
var architectures = []specs.Arch{
	specs.ArchX86_64, specs.ArchX86, specs.ArchX32,
	specs.ArchAARCH64, specs.ArchARM,
}

// Profile is the rootless-dind profile.
func Profile() *specs.LinuxSeccomp {
	p := seccomp.DefaultProfile(&specs.Spec{Process: &specs.Process{
		Capabilities: &specs.LinuxCapabilities{Bounding: defaultCapabilities},
	}})
	p.Architectures = slices.Clone(architectures)
	p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: slices.Clone(extra), Action: specs.ActAllow})
	return p
}

func main() {
	out := flag.String("o", "", "the file to write (default: standard output)")
	flag.Parse()
	raw, err := json.MarshalIndent(Profile(), "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	raw = append(raw, '\n')
	if *out == "" {
		_, err = os.Stdout.Write(raw)
	} else {
		err = os.WriteFile(*out, raw, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
