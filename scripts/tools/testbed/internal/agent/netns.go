package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AnnotationForward asks the agent to run the pod's process containers in a
// network namespace of their own, as a real pod's are, and to play the
// pod's Service on loopback: "127.0.0.1:<host port>=<container port>"
// forwards every connection to that host address into the namespace of the
// pod's running process, at 127.0.0.1:<container port>. For a pod whose
// process listens on every interface (gitea-runner cache-server does, and
// has no flag against it): on the bed nothing may listen beyond loopback,
// and in its own namespace the process's "every interface" is its own
// loopback only. Needs root (CLONE_NEWNET, setns), as the bed runs.
const AnnotationForward = "testbed.gitea.bpg.pw/forward"

// Forward is one parsed AnnotationForward.
type Forward struct {
	HostAddr      string // 127.0.0.1:<port>
	ContainerPort int
}

// ParseForward reads AnnotationForward's value. Only a loopback host
// address is accepted: the bed listens on nothing else.
func ParseForward(v string) (Forward, error) {
	host, port, ok := strings.Cut(v, "=")
	if !ok {
		return Forward{}, fmt.Errorf("%s %q: want 127.0.0.1:<host port>=<container port>", AnnotationForward, v)
	}
	h, hp, err := net.SplitHostPort(host)
	if err != nil {
		return Forward{}, fmt.Errorf("%s %q: %w", AnnotationForward, v, err)
	}
	if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
		return Forward{}, fmt.Errorf("%s %q: the host address must be a loopback IP", AnnotationForward, v)
	}
	if n, err := strconv.Atoi(hp); err != nil || n < 1 || n > 65535 {
		return Forward{}, fmt.Errorf("%s %q: bad host port", AnnotationForward, v)
	}
	cp, err := strconv.Atoi(port)
	if err != nil || cp < 1 || cp > 65535 {
		return Forward{}, fmt.Errorf("%s %q: bad container port", AnnotationForward, v)
	}
	return Forward{HostAddr: host, ContainerPort: cp}, nil
}

// podNetwork is the forward of one pod: the pid whose network namespace
// connections go into (the pod's running process container; 0 while none
// runs) and the listener on the host side.
type podNetwork struct {
	fwd Forward
	log *slog.Logger
	mu  sync.Mutex
	pid int
}

func (n *podNetwork) setPID(pid int) {
	n.mu.Lock()
	n.pid = pid
	n.mu.Unlock()
}

func (n *podNetwork) currentPID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

// serve accepts on the host address until ctx ends, forwarding each
// connection into the pod's namespace. A connection while no process runs
// is closed, as a Service without ready endpoints refuses.
func (n *podNetwork) serve(ctx context.Context) error {
	l, err := net.Listen("tcp", n.fwd.HostAddr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go n.forward(c)
		}
	}()
	return nil
}

func (n *podNetwork) forward(c net.Conn) {
	defer c.Close()
	pid := n.currentPID()
	if pid == 0 {
		return
	}
	up, err := dialInNetns(pid, fmt.Sprintf("127.0.0.1:%d", n.fwd.ContainerPort))
	if err != nil {
		n.log.Warn("cannot forward into the pod's network namespace", "pid", pid, "err", err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// inNetns runs f on an OS thread moved into the network namespace of pid,
// then moves the thread back. A socket made in f stays in that namespace.
// A thread that cannot move back is not unlocked, so Go retires it.
func inNetns(pid int, f func() error) error {
	target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	runtime.LockOSThread()
	self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(self)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns: %w", err)
	}
	ferr := f()
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// dialInNetns connects to addr from inside pid's network namespace. The
// socket is made by a raw socket(2) on the moved thread (Go's dialer may
// make it on another thread), then handed to the net package.
func dialInNetns(pid int, addr string) (net.Conn, error) {
	tcp, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	var fd int
	err = inNetns(pid, func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		sa := &unix.SockaddrInet4{Port: tcp.Port}
		copy(sa.Addr[:], tcp.IP.To4())
		if err := unix.Connect(fd, sa); err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f := newFile(fd, "netns-conn")
	defer f.Close()
	return net.FileConn(f)
}

// loopbackUp sets lo up in pid's network namespace: a new namespace's lo
// starts down.
func loopbackUp(pid int) error {
	return inNetns(pid, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var req [unix.IFNAMSIZ + 24]byte
		copy(req[:], "lo")
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
			return fmt.Errorf("SIOCGIFFLAGS: %w", e)
		}
		flags := *(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ]))
		*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = flags | unix.IFF_UP | unix.IFF_RUNNING
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
			return fmt.Errorf("SIOCSIFFLAGS: %w", e)
		}
		return nil
	})
}

// newNetnsAttr is the SysProcAttr part that starts a process in a new
// network namespace.
func newNetnsAttr(a *syscall.SysProcAttr) { a.Cloneflags |= syscall.CLONE_NEWNET }

func newFile(fd int, name string) *os.File { return os.NewFile(uintptr(fd), name) }
