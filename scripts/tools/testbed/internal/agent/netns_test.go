package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseForward(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Forward
		wantErr string
	}{
		"loopback":             {in: "127.0.0.1:28088=8088", want: Forward{HostAddr: "127.0.0.1:28088", ContainerPort: 8088}},
		"every interface":      {in: "0.0.0.0:28088=8088", wantErr: "must be a loopback IP"},
		"a name":               {in: "localhost:28088=8088", wantErr: "must be a loopback IP"},
		"no container port":    {in: "127.0.0.1:28088", wantErr: "want 127.0.0.1:<host port>=<container port>"},
		"a bad container port": {in: "127.0.0.1:28088=http", wantErr: "bad container port"},
		"a port out of range":  {in: "127.0.0.1:70000=80", wantErr: "bad host port"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseForward(tt.in)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestForwardIntoANetworkNamespace: a process in a network namespace of
// its own that listens on every interface is reached through the host's
// loopback forward only; the host itself has nothing on that port. Needs
// root, as the bed does.
func TestForwardIntoANetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for CLONE_NEWNET and setns, as the bed runs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The child: a tiny server on every interface (":port"), as
	// gitea-runner cache-server listens. Python is not assumed: the test
	// binary serves, through a helper subprocess.
	port := freePort(t)
	cmd := exec.Command(os.Args[0], "-test.run=TestHelperEchoServer", "--", fmt.Sprint(port))
	cmd.Env = append(os.Environ(), "TESTBED_ECHO_HELPER=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	newNetnsAttr(cmd.SysProcAttr)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.NoError(t, loopbackUp(cmd.Process.Pid))
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "listening\n", line)

	_, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	require.Error(t, err, "the host's loopback has nothing on the container's port")

	hostPort := freePort(t)
	n := &podNetwork{fwd: Forward{HostAddr: fmt.Sprintf("127.0.0.1:%d", hostPort), ContainerPort: port}, log: discardLogger()}
	require.NoError(t, n.serve(ctx))
	c, err := net.Dial("tcp", n.fwd.HostAddr)
	require.NoError(t, err)
	buf := make([]byte, 16)
	k, _ := c.Read(buf)
	assert.Equal(t, 0, k, "no running process: the connection is closed")
	c.Close()

	n.setPID(cmd.Process.Pid)
	c, err = net.Dial("tcp", n.fwd.HostAddr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("ping\n"))
	require.NoError(t, err)
	reply, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "pong ping\n", reply)
}

// TestHelperEchoServer is the child of TestForwardIntoANetworkNamespace.
func TestHelperEchoServer(t *testing.T) {
	if os.Getenv("TESTBED_ECHO_HELPER") != "1" {
		t.Skip("helper process")
	}
	port := os.Args[len(os.Args)-1]
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "pong %s", line)
		}()
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
