package tundevice

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func TestDevicesAreCountHealthyIDs(t *testing.T) {
	p := &Plugin{Count: 3}
	var ids []string
	for _, d := range p.Devices() {
		assert.Equal(t, pluginapi.Healthy, d.Health)
		ids = append(ids, d.ID)
	}
	assert.Equal(t, []string{"tun-0", "tun-1", "tun-2"}, ids)
}

// Each container that asked gets the device node, read-write, and
// nothing else: no mount, no environment.
func TestAllocateHandsOutTheDeviceAlone(t *testing.T) {
	p := &Plugin{Device: "/dev/net/tun", Count: 2}
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"tun-0"}}, {DevicesIds: []string{"tun-1"}},
	}})
	require.NoError(t, err)
	require.Len(t, resp.ContainerResponses, 2)
	for _, c := range resp.ContainerResponses {
		assert.Equal(t, []*pluginapi.DeviceSpec{{ContainerPath: "/dev/net/tun", HostPath: "/dev/net/tun", Permissions: "rw"}}, c.Devices)
		assert.Empty(t, c.Mounts)
		assert.Empty(t, c.Envs)
	}
	_, err = p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{}}})
	assert.Error(t, err, "an allocation without a device")
}

// The kubelet's plugin watcher learns what the socket serves.
func TestTheRegistrarSaysItIsADevicePluginOfTheResource(t *testing.T) {
	r := &registrar{plugin: &Plugin{Resource: "example.com/tun"}, endpoint: "/x/tun.sock"}
	info, err := r.GetInfo(context.Background(), &registration.InfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, registration.DevicePlugin, info.Type)
	assert.Equal(t, "example.com/tun", info.Name)
	assert.Equal(t, "/x/tun.sock", info.Endpoint)
	assert.Equal(t, []string{pluginapi.Version}, info.SupportedVersions)
}
