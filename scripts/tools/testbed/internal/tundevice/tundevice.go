// Package tundevice is a kubelet device plugin that hands pods the node's
// /dev/net/tun: a pod that asks for one of its resource gets the device
// node, and no other right. Without it, a pod gets the device only when
// privileged, and a rootless Docker daemon in an unprivileged
// (user-namespaced) runner pod has no slirp4netns, so no network for its
// job containers. Clusters have plugins that do this (for instance
// squat/generic-device-plugin); the bed runs this one, which is small
// enough to read whole.
package tundevice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Plugin serves Count interchangeable devices of Resource, each of them
// the node's Device.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	// Dir is the kubelet's plugins_registry folder (under its root dir).
	Dir string
	// Resource is the extended resource name pods ask for.
	Resource string
	// Device is the device node's path, the same on the node and in the
	// container.
	Device string
	// Count is how many pods at once may hold one.
	Count int
	// Socket is this plugin's socket's name in Dir.
	Socket string
	Log    *slog.Logger
}

// Devices lists the plugin's devices, all healthy: the device node is
// shared, so they differ only in their IDs.
func (p *Plugin) Devices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, p.Count)
	for i := range out {
		out[i] = &pluginapi.Device{ID: fmt.Sprintf("tun-%d", i), Health: pluginapi.Healthy}
	}
	return out
}

// GetDevicePluginOptions says the plugin needs no call before a container
// starts and has no preferred allocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once; they never change.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.Devices()}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// Allocate gives each container that asked the device node, read and
// write, and nothing else (no mount, no environment).
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		if len(c.DevicesIds) == 0 {
			return nil, errors.New("an allocation without a device")
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: p.Device, HostPath: p.Device, Permissions: "rw"}},
		})
	}
	return resp, nil
}

// Run serves the plugin on Socket in Dir, the kubelet's plugins_registry
// folder, until ctx ends. The kubelet's plugin watcher finds the socket,
// asks it what it is (GetInfo), and then serves the resource through the
// same socket; a restarted kubelet finds it again the same way.
func (p *Plugin) Run(ctx context.Context) error {
	if _, err := os.Stat(p.Device); err != nil {
		return fmt.Errorf("the device: %w", err)
	}
	sock := filepath.Join(p.Dir, p.Socket)
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer os.Remove(sock)
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	registration.RegisterRegistrationServer(srv, &registrar{plugin: p, endpoint: sock})
	p.Log.Info("serving", "resource", p.Resource, "devices", p.Count, "socket", sock)
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// registrar answers the kubelet's plugin watcher.
type registrar struct {
	registration.UnimplementedRegistrationServer
	plugin   *Plugin
	endpoint string
}

func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{
		Type:              registration.DevicePlugin,
		Name:              r.plugin.Resource,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{pluginapi.Version},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, st *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if st.PluginRegistered {
		r.plugin.Log.Info("registered with the kubelet", "resource", r.plugin.Resource)
	} else {
		r.plugin.Log.Error("the kubelet refused the plugin", "error", st.Error)
	}
	return &registration.RegistrationStatusResponse{}, nil
}
