// Command tun-device-plugin runs the bed's kubelet device plugin for
// /dev/net/tun (package tundevice) on the real node until it is signalled.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gitea-runner-operator/gitea-runner-operator/scripts/tools/testbed/internal/tundevice"
)

func main() {
	p := tundevice.Plugin{Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	flag.StringVar(&p.Dir, "dir", "", "the kubelet's plugins_registry folder, in its root dir")
	flag.StringVar(&p.Resource, "resource", "testbed.gitea.bpg.pw/tun", "the extended resource pods ask for")
	flag.StringVar(&p.Device, "device", "/dev/net/tun", "the device node handed to pods")
	flag.IntVar(&p.Count, "count", 32, "how many pods at once may hold the device")
	flag.StringVar(&p.Socket, "socket", "testbed-tun.sock", "this plugin's socket's name in -dir")
	flag.Parse()
	if p.Dir == "" || p.Count < 1 {
		p.Log.Error("-dir is required and -count must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := p.Run(ctx); err != nil {
		p.Log.Error("tun device plugin", "err", err)
		os.Exit(1)
	}
}
