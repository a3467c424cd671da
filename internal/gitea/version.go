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

// compatVersion reads a server that answers with a Gitea compatibility
// version, as Forgejo does ("11.0.3+gitea-1.22.0"): its own version, then
// the Gitea release it says it is compatible with.
var compatVersion = regexp.MustCompile(`^v?(\d{1,4}\.\d{1,4}\.\d{1,6})(?:-[0-9A-Za-z.-]*)?\+gitea-(\d{1,4}\.\d{1,4}\.\d{1,6})`)

// explainFailure turns a failed Actions request into ErrUnsupportedServer
// when the server says it is Forgejo (or any server with a Gitea
// compatibility version), and into ErrUnsupportedVersion when it says it
// is a Gitea release older than MinVersion. Such a server answers an
// Actions route with a 404 just like its answer for an unknown org, or
// with something else the scaler cannot read; users would otherwise hunt
// for a typo. Only failures with an answer are explained (a connection
// that failed says nothing of the server), and no version is asked while
// the server works. Any other error, and a failure from a Gitea that is
// new enough or does not say, is returned as it is. Only the version's
// numbers reach the message: the rest of the server's answer is not ours
// to print.
func (c *client) explainFailure(ctx context.Context, err error) error {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status == 0 {
		return err
	}
	switch ae.Kind {
	case ErrNotFound, ErrBadResponse, ErrServer:
	default:
		return err
	}
	var v struct {
		Version string `json:"version"`
	}
	if _, verr := c.getJSON(ctx, "/version", nil, &v); verr != nil {
		return err
	}
	if m := compatVersion.FindStringSubmatch(v.Version); m != nil {
		return &APIError{Method: ae.Method, Kind: ErrUnsupportedServer, URL: ae.URL, Status: ae.Status,
			Message: fmt.Sprintf("the server is Forgejo %s (compatible with Gitea %s), which the scaler does not support yet: it reads Gitea's Actions jobs and runners API (%s or newer), which Forgejo does not serve; use Gitea", m[1], m[2], MinVersion)}
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
