package runnerjob

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The chart's artifacthub.io/images annotation names the default runner
// image, and `make release` pins that entry by digest as the chart's
// scaler.runnerImage: it must be the image the scaler defaults to, or a
// release would pin another runner than the one it was tested with.
func TestTheChartNamesTheDefaultRunnerImage(t *testing.T) {
	raw, err := os.ReadFile("../../charts/gitea-runner-operator/Chart.yaml")
	require.NoError(t, err)
	var chart struct {
		Annotations map[string]string `yaml:"annotations"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	var images []struct{ Name, Image string }
	require.NoError(t, yaml.Unmarshal([]byte(chart.Annotations["artifacthub.io/images"]), &images))
	named := map[string]string{}
	for _, im := range images {
		named[im.Name] = im.Image
	}
	assert.Equal(t, "docker.io/"+DefaultImage, named["gitea-runner"])
}
