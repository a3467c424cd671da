package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// The Dockerfile, the chart and the code agree on what the image must be:
// where the binary is, which user runs it, and which variable the version
// is stamped into. `make image` builds the image without Docker, and
// scripts/tools/image checks it and holds the Dockerfile to the same
// content.
func TestImageAgreesWithChartAndCode(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	df := string(raw)

	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
		} `yaml:"image"`
	}
	rawValues, err := os.ReadFile("../../charts/gitea-runner-operator/values.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(rawValues, &values))

	defaults, err := os.ReadFile("../../charts/gitea-runner-operator/templates/_pod.tpl")
	require.NoError(t, err)

	tests := []struct {
		name string
		re   string
		in   string
	}{
		{"the binary lands on PATH", `COPY --from=build /out/gitea-runner-scaler /usr/local/bin/gitea-runner-scaler`, df},
		{"it runs as the chart's non-root user", `(?m)^USER 65532:65532$`, df},
		{"the chart runs that user", `runAsUser: 65532`, string(defaults)},
		{"the chart calls the binary by name", `gitea-runner-scaler`, string(defaults)},
		{"the version goes into cli.Version", `-X github.com/gitea-runner-operator/gitea-runner-operator/internal/cli.Version=`, df},
		{"the build is static", `CGO_ENABLED=0`, df},
		{"the runtime image is from scratch", `(?m)^FROM scratch$`, df},
	}
	for _, tt := range tests {
		assert.Regexp(t, regexp.MustCompile(tt.re), tt.in, tt.name)
	}
	assert.Regexp(t, `gitea-runner-scaler$`, values.Image.Repository, "the chart's image is this one")
}

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
	assert.Equal(t, "docker.io/"+runnerjob.DefaultImage, named["gitea-runner"])
}
