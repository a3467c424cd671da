package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	runnerv1 "code.gitea.io/actions-proto-go/runner/v1"
	"code.gitea.io/actions-proto-go/runner/v1/runnerv1connect"
	"connectrpc.com/connect"
)

// NewRunner is a runner the scaler registers itself, in place of the
// runner pod registering with the scope's registration token.
type NewRunner struct {
	Name string
	// Labels are the runner's full labels (name:scheme:arg); Gitea is
	// sent their names, as the runner's own register command sends them.
	Labels    []string
	Ephemeral bool
}

// RunnerCredentials are one registered runner's own credentials: what the
// runner's .runner state file holds. Token is the runner's secret; it is
// good for this runner alone, and for an ephemeral runner only until its
// one task is done.
type RunnerCredentials struct {
	ID        int64
	UUID      string
	Name      string
	Token     string
	Address   string
	Labels    []string
	Ephemeral bool
}

// RunnerRegistrar registers runners on the client's Gitea, through the
// client's HTTP client (the allowed Gitea URLs and CA apply as to every
// other request). The API token is not sent: the registration token
// decides the scope.
type RunnerRegistrar interface {
	RegisterRunner(ctx context.Context, registrationToken string, r NewRunner) (RunnerCredentials, error)
}

// RegisterRunner implements RunnerRegistrar.
func (c *client) RegisterRunner(ctx context.Context, registrationToken string, r NewRunner) (RunnerCredentials, error) {
	return RegisterRunner(ctx, c.opts.HTTPClient, c.opts.Timeout, c.baseURL, registrationToken, r)
}

// RegisterVersion is the runner version the scaler gives Gitea when it
// registers a runner: Gitea shows it until the runner declares its own.
const RegisterVersion = "gitea-runner-operator"

// ErrNotEphemeral: Gitea registered the runner but not as ephemeral (a
// Gitea too old to know ephemeral runners), so its credentials would not
// expire after one job. The registration is removed again by the caller.
var ErrNotEphemeral = errors.New("gitea registered the runner, but not as ephemeral")

// RegisterRunner registers one runner with Gitea at instanceURL through the
// runner protocol's Register call, the call gitea-runner's register command
// makes, with the scope's registration token. The runner lands in the
// token's scope. hc sends the request (nil: a plain client); timeout bounds
// it (0: DefaultTimeout).
//
// Errors never hold the registration token or the runner's: a refused
// token is ErrUnauthorized, an unreachable or failing Gitea ErrServer.
func RegisterRunner(ctx context.Context, hc *http.Client, timeout time.Duration, instanceURL, registrationToken string, r NewRunner) (RunnerCredentials, error) {
	if hc == nil {
		hc = &http.Client{}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	address := strings.TrimSuffix(instanceURL, "/")
	cli := runnerv1connect.NewRunnerServiceClient(hc, address+"/api/actions")
	names := make([]string, len(r.Labels))
	for i, l := range r.Labels {
		names[i], _, _ = strings.Cut(l, ":")
	}
	resp, err := cli.Register(ctx, connect.NewRequest(&runnerv1.RegisterRequest{
		Name:      r.Name,
		Token:     registrationToken,
		Version:   RegisterVersion,
		Labels:    names,
		Ephemeral: r.Ephemeral,
	}))
	if err != nil {
		return RunnerCredentials{}, registerError(err, registrationToken)
	}
	got := resp.Msg.GetRunner()
	if got == nil || got.GetId() == 0 || got.GetToken() == "" || got.GetUuid() == "" {
		return RunnerCredentials{}, fmt.Errorf("%w: Gitea's answer to Register names no runner", ErrBadResponse)
	}
	creds := RunnerCredentials{
		ID: got.GetId(), UUID: got.GetUuid(), Name: got.GetName(), Token: got.GetToken(),
		Address: address, Labels: r.Labels, Ephemeral: got.GetEphemeral(),
	}
	if r.Ephemeral && !creds.Ephemeral {
		return creds, ErrNotEphemeral
	}
	return creds, nil
}

// registerError classifies a failed Register call by its Connect code,
// with the token cut out of whatever text Gitea or the transport gave.
func registerError(err error, token string) error {
	kind := ErrServer
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		kind = ErrUnauthorized
	case connect.CodePermissionDenied:
		kind = ErrForbidden
	case connect.CodeDeadlineExceeded:
		kind = ErrTimeout
	case connect.CodeInvalidArgument:
		kind = ErrBadResponse
	case connect.CodeUnknown:
		// Gitea answers every refusal as a plain error (code unknown);
		// the token's are the ones that name it ("runner registration
		// token not found", "... has been invalidated ...").
		if strings.Contains(connectMessage(err), "registration token") {
			kind = ErrUnauthorized
		}
	}
	return fmt.Errorf("%w: cannot register a runner with Gitea: %s", kind, tidy(connectMessage(err), token))
}

func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}
