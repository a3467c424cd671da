package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runtimeStage is the Dockerfile's last stage as instruction -> arguments,
// continuation lines joined. COPY and LABEL may repeat, so they collect.
func runtimeStage(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../../../Dockerfile")
	require.NoError(t, err)
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(raw), " ")
	stage := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, args, _ := strings.Cut(line, " ")
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			stage = map[string][]string{}
		}
		stage[instr] = append(stage[instr], strings.TrimSpace(args))
	}
	return stage
}

func jsonArgs(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	require.NoError(t, json.Unmarshal([]byte(s), &out), s)
	return out
}

// The Dockerfile is for those with Docker; it must give what `make image`
// gives, which TestBuild* and TestReleaseImage check in detail.
func TestDockerfileBuildsWhatMakeImageBuilds(t *testing.T) {
	st := runtimeStage(t)
	assert.Equal(t, []string{"scratch"}, st["FROM"], "from scratch, as make image")
	assert.Equal(t, []string{User}, st["USER"])
	require.Len(t, st["ENTRYPOINT"], 1)
	assert.Equal(t, Entrypoint, jsonArgs(t, st["ENTRYPOINT"][0]))
	require.Len(t, st["CMD"], 1)
	assert.Equal(t, Cmd, jsonArgs(t, st["CMD"][0]))
	assert.Equal(t, []string{Path}, st["ENV"])
	assert.ElementsMatch(t, []string{
		"scripts/tools/image/rootfs/ /",
		"--from=build " + CAPath + " " + CAPath,
		"--from=build /out/gitea-runner-scaler " + BinaryPath,
	}, st["COPY"], "the same files: the shared rootfs, Debian's CA bundle (the golang bookworm image's), the binary")

	require.Len(t, st["LABEL"], 1)
	labels := map[string]string{}
	for _, m := range regexp.MustCompile(`(\S+)="([^"]*)"`).FindAllStringSubmatch(st["LABEL"][0], -1) {
		labels[m[1]] = m[2]
	}
	want := Spec{Source: "https://github.com/gitea-runner-operator/gitea-runner-operator", Version: "${VERSION}", Revision: "${REVISION}"}.Labels()
	assert.Equal(t, want, labels)
}

// The build context leaves scripts/ out, all but the rootfs the image copies.
func TestDockerignoreLetsTheRootfsIn(t *testing.T) {
	raw, err := os.ReadFile("../../../.dockerignore")
	require.NoError(t, err)
	assert.Contains(t, strings.Split(string(raw), "\n"), "!scripts/tools/image/rootfs")
}
