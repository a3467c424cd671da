package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// scalerImageName and runnerImageName name the scaler's and the default
// runner's entries in the chart's artifacthub.io/images annotation.
const (
	scalerImageName = "gitea-runner-scaler"
	runnerImageName = "gitea-runner"
)

// ChartPin is what a released chart names: its version, the scaler image
// by repository, tag and digest, and, when RunnerDigest is set, the default
// runner image by that digest.
type ChartPin struct {
	Version    string
	Repository string
	Digest     string
	// RunnerDigest is the digest of the runner image the annotation names
	// (Gitea's, which the release does not build): the copy's
	// scaler.runnerImage becomes that image by digest, so every runner pod
	// of the release pulls what the release was tested with.
	RunnerDigest string
}

// PinChart copies the chart in src to dst (replaced) and pins the copy:
// Chart.yaml's version and appVersion become the release's version,
// values.yaml's image.repository, image.tag and image.digest name the pushed
// image, and the artifacthub.io/images annotation names it by digest too.
// Only those values change; every comment and line of the two files stays,
// since values.yaml's comments are the chart's documentation.
func PinChart(src, dst string, pin ChartPin) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := copyDir(src, dst); err != nil {
		return err
	}
	valuesFile := filepath.Join(dst, "values.yaml")
	values, err := os.ReadFile(valuesFile)
	if err != nil {
		return err
	}
	oldRepo, err := scalarAt(values, "image", "repository")
	if err != nil {
		return fmt.Errorf("values.yaml: %w", err)
	}
	for _, kv := range [][2]string{{"repository", pin.Repository}, {"tag", pin.Version}, {"digest", pin.Digest}} {
		if values, err = setScalar(values, kv[1], "image", kv[0]); err != nil {
			return fmt.Errorf("values.yaml: %w", err)
		}
	}
	chartFile := filepath.Join(dst, "Chart.yaml")
	chart, err := os.ReadFile(chartFile)
	if err != nil {
		return err
	}
	oldApp, err := scalarAt(chart, "appVersion")
	if err != nil {
		return fmt.Errorf("Chart.yaml: %w", err)
	}
	for _, key := range []string{"version", "appVersion"} {
		if chart, err = setScalar(chart, pin.Version, key); err != nil {
			return fmt.Errorf("Chart.yaml: %w", err)
		}
	}
	// The annotation's scaler entry names the image the unpinned chart
	// runs: values.yaml's repository at the appVersion.
	chart, err = replaceAnnotatedImage(chart, scalerImageName, oldRepo+":"+oldApp, pin.Repository+":"+pin.Version+"@"+pin.Digest)
	if err != nil {
		return err
	}
	if pin.RunnerDigest != "" {
		if chart, values, err = pinRunner(chart, values, pin.RunnerDigest); err != nil {
			return err
		}
	}
	if err := os.WriteFile(valuesFile, values, 0o644); err != nil {
		return err
	}
	return os.WriteFile(chartFile, chart, 0o644)
}

// pinRunner names the annotation's runner image by digest, there and as
// values.yaml's scaler.runnerImage (empty in the source chart: the
// scaler's built-in default, the same image by tag).
func pinRunner(chart, values []byte, digest string) ([]byte, []byte, error) {
	image, err := annotatedImage(chart, runnerImageName)
	if err != nil {
		return nil, nil, err
	}
	if strings.Contains(image, "@") {
		return nil, nil, fmt.Errorf("Chart.yaml: artifacthub.io/images names %s by digest already (%q)", runnerImageName, image)
	}
	if cur, err := scalarAt(values, "scaler", "runnerImage"); err != nil {
		return nil, nil, fmt.Errorf("values.yaml: %w", err)
	} else if cur != "" {
		return nil, nil, fmt.Errorf("values.yaml: scaler.runnerImage is %q; the release pins the default runner image only while it is empty", cur)
	}
	pinned := image + "@" + digest
	if chart, err = replaceAnnotatedImage(chart, runnerImageName, image, pinned); err != nil {
		return nil, nil, err
	}
	if values, err = setScalar(values, pinned, "scaler", "runnerImage"); err != nil {
		return nil, nil, fmt.Errorf("values.yaml: %w", err)
	}
	return chart, values, nil
}

// annotatedImage is the image the artifacthub.io/images annotation names
// for the entry called name.
func annotatedImage(chart []byte, name string) (string, error) {
	var c struct {
		Annotations map[string]string `yaml:"annotations"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil {
		return "", fmt.Errorf("Chart.yaml: %w", err)
	}
	var images []struct{ Name, Image string }
	if err := yaml.Unmarshal([]byte(c.Annotations["artifacthub.io/images"]), &images); err != nil {
		return "", fmt.Errorf("Chart.yaml: artifacthub.io/images: %w", err)
	}
	for _, im := range images {
		if im.Name == name {
			return im.Image, nil
		}
	}
	return "", fmt.Errorf("Chart.yaml: artifacthub.io/images has no entry named %s", name)
}

// replaceAnnotatedImage rewrites the annotation's entry called name from
// image old to image new. The annotation is a YAML document in a string,
// so its text is replaced (every other line of Chart.yaml stays) and then
// read back.
func replaceAnnotatedImage(chart []byte, name, old, new string) ([]byte, error) {
	if n := strings.Count(string(chart), "image: "+old+"\n"); n != 1 {
		return nil, fmt.Errorf("Chart.yaml: the artifacthub.io/images annotation must name %q exactly once (its %s entry), found %d", old, name, n)
	}
	chart = []byte(strings.Replace(string(chart), "image: "+old+"\n", "image: "+new+"\n", 1))
	image, err := annotatedImage(chart, name)
	if err != nil {
		return nil, err
	}
	if image != new {
		return nil, fmt.Errorf("Chart.yaml: artifacthub.io/images names %s as %q, want %q", name, image, new)
	}
	return chart, nil
}

// scalarNode finds the scalar at a path of mapping keys.
func scalarNode(doc []byte, path ...string) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, errors.New("not one YAML document")
	}
	n := root.Content[0]
	for i, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s is not a mapping", strings.Join(path[:i], "."))
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next = n.Content[j+1]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("%s is missing", strings.Join(path[:i+1], "."))
		}
		n = next
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("%s is not a scalar", strings.Join(path, "."))
	}
	return n, nil
}

func scalarAt(doc []byte, path ...string) (string, error) {
	n, err := scalarNode(doc, path...)
	if err != nil {
		return "", err
	}
	return n.Value, nil
}

// setScalar replaces the scalar at path with a double-quoted value, in the
// text, on the scalar's own line: nothing else of the file changes.
func setScalar(doc []byte, value string, path ...string) ([]byte, error) {
	n, err := scalarNode(doc, path...)
	if err != nil {
		return nil, err
	}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return nil, fmt.Errorf("%s is a block scalar", strings.Join(path, "."))
	}
	lines := strings.SplitAfter(string(doc), "\n")
	line := lines[n.Line-1]
	col := n.Column - 1
	// The scalar's text as written: quoted or plain, up to a comment or
	// the end of the line.
	rest := line[col:]
	var end int
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0, n.Style&yaml.SingleQuotedStyle != 0:
		q := rest[0]
		end = 1 + strings.IndexByte(rest[1:], q) + 1
		if end <= 1 {
			return nil, fmt.Errorf("%s: cannot find its closing quote", strings.Join(path, "."))
		}
	default:
		end = len(strings.TrimRight(strings.SplitN(rest, " #", 2)[0], " \r\n"))
	}
	lines[n.Line-1] = line[:col] + strconv.Quote(value) + rest[end:]
	out := []byte(strings.Join(lines, ""))
	if got, err := scalarAt(out, path...); err != nil || got != value {
		return nil, fmt.Errorf("%s: setting %q gave %q (%v)", strings.Join(path, "."), value, got, err)
	}
	return out, nil
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, raw, info.Mode().Perm())
	})
}
