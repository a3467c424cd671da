package gitea

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// MinVersion is the oldest Gitea release the scaler reads: it needs the
// Actions jobs listings and the runners API as 1.26 answers them (see
// testdata/README.md).
const MinVersion = "1.26"

// minMajor, minMinor are MinVersion's numbers.
const minMajor, minMinor = 1, 26

// releaseVersion reads the major and minor of a release's version string
// ("1.25.3", "v1.22.6+12-gabcdef"); a build from source answers
// "development", which is no release.
var releaseVersion = regexp.MustCompile(`^v?(\d{1,4})\.(\d{1,4})\.\d{1,6}(?:[-+][0-9A-Za-z.+-]*)?$`)

// explainNotFound turns a 404 into ErrUnsupportedVersion when Gitea says
// it is a release older than MinVersion, whose answer to an Actions route
// is a 404 just like its answer for an unknown org; users would otherwise
// hunt for a typo. Any other error, and a 404 from a Gitea that is new
// enough or does not say, is returned as it is. Only the version's numbers
// reach the message: the rest of Gitea's answer is not ours to print.
func (c *client) explainNotFound(ctx context.Context, err error) error {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Kind != ErrNotFound {
		return err
	}
	var v struct {
		Version string `json:"version"`
	}
	if _, verr := c.getJSON(ctx, "/version", nil, &v); verr != nil {
		return err
	}
	m := releaseVersion.FindStringSubmatch(v.Version)
	if m == nil {
		return err
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major > minMajor || (major == minMajor && minor >= minMinor) {
		return err
	}
	return &APIError{Method: ae.Method, Kind: ErrUnsupportedVersion, URL: ae.URL, Status: ae.Status,
		Message: fmt.Sprintf("Gitea %d.%d is older than %s, the oldest release whose Actions jobs and runners API the scaler reads; upgrade Gitea", major, minor, MinVersion)}
}
