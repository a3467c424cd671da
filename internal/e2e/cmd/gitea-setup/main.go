// Command gitea-setup sets Gitea up for the test bed's scripts (scripts/testbed
// smoke, scripts/demo) with the same client the e2e tests use
// (internal/e2e/giteasetup), so there is one Gitea setup client in the project.
//
// It reads Gitea's URL from --url or GITEA_URL and the admin token from
// GITEA_ADMIN_TOKEN only, never from a flag, so that the token does not show
// in a process list; `eval "$(scripts/testbed env)"` exports both, and
// `scripts/testbed gitea-setup ...` runs it with the bed's.
//
// Exit codes: 0 done (or, for `exists`, it exists); 1 it does not exist
// (`exists` only); 2 an error or bad arguments.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
)

const (
	exitOK     = 0
	exitAbsent = 1
	exitError  = 2
)

// errAbsent is what `exists` returns for a 404.
var errAbsent = errors.New("does not exist")

type cli struct {
	URL string `placeholder:"URL" help:"Gitea's base URL; default: GITEA_URL."`

	Org struct {
		Create orgCreate `cmd:"" help:"Create a public organisation."`
		Exists orgExists `cmd:"" help:"Exit 0 if the organisation exists, 1 if not."`
		Delete orgDelete `cmd:"" help:"Delete an organisation (delete its repositories first)."`
	} `cmd:"" help:"Organisations."`
	Repo struct {
		Create repoCreate `cmd:"" help:"Create ORG/NAME in an organisation, with a first commit on branch main."`
		Exists repoExists `cmd:"" help:"Exit 0 if OWNER/NAME exists, 1 if not."`
		Delete repoDelete `cmd:"" help:"Delete OWNER/NAME with its Actions runs."`
	} `cmd:"" help:"Repositories."`
	RegistrationToken registrationToken `cmd:"" help:"Print a runner registration token: global, org NAME or repo OWNER/NAME."`
	PushWorkflow      pushWorkflow      `cmd:"" help:"Commit FILE (- for stdin) as .gitea/workflows/NAME on main, which triggers it."`
	Jobs              jobs              `cmd:"" help:"Print every Actions job of OWNER/NAME as Gitea lists them: {\"jobs\": [...]}."`
}

// session is what every command runs with.
type session struct {
	ctx    context.Context
	gitea  *giteasetup.Client
	stdin  io.Reader
	stdout io.Writer
}

type orgCreate struct {
	Name string `arg:""`
}

func (c *orgCreate) Run(s *session) error { return s.gitea.CreateOrg(s.ctx, c.Name) }

type orgExists struct {
	Name string `arg:""`
}

func (c *orgExists) Run(s *session) error {
	return absentIfFalse(s.gitea.OrgExists(s.ctx, c.Name))
}

type orgDelete struct {
	Name string `arg:""`
}

func (c *orgDelete) Run(s *session) error { return s.gitea.DeleteOrg(s.ctx, c.Name) }

// repoArg is an OWNER/NAME argument.
type repoArg struct {
	Repo string `arg:"" placeholder:"OWNER/NAME"`
}

func (a repoArg) parse() (giteasetup.Repo, error) { return giteasetup.ParseRepo(a.Repo) }

type repoCreate struct{ repoArg }

func (c *repoCreate) Run(s *session) error {
	r, err := c.parse()
	if err != nil {
		return err
	}
	_, err = s.gitea.CreateOrgRepo(s.ctx, r.Owner, r.Name)
	return err
}

type repoExists struct{ repoArg }

func (c *repoExists) Run(s *session) error {
	r, err := c.parse()
	if err != nil {
		return err
	}
	return absentIfFalse(s.gitea.RepoExists(s.ctx, r))
}

type repoDelete struct{ repoArg }

func (c *repoDelete) Run(s *session) error {
	r, err := c.parse()
	if err != nil {
		return err
	}
	return s.gitea.DeleteRepo(s.ctx, r)
}

type registrationToken struct {
	Scope string `arg:"" enum:"global,org,repo" help:"global, org or repo."`
	Name  string `arg:"" optional:"" help:"The organisation (org) or OWNER/NAME (repo)."`
}

func (c *registrationToken) Run(s *session) error {
	var scope giteasetup.Runners
	switch {
	case c.Scope == "global" && c.Name == "":
		scope = giteasetup.GlobalRunners()
	case c.Scope == "org" && c.Name != "":
		scope = giteasetup.OrgRunners(c.Name)
	case c.Scope == "repo" && c.Name != "":
		r, err := giteasetup.ParseRepo(c.Name)
		if err != nil {
			return err
		}
		scope = giteasetup.RepoRunners(r)
	default:
		return fmt.Errorf("want `global`, `org NAME` or `repo OWNER/NAME`, not %q %q", c.Scope, c.Name)
	}
	token, err := s.gitea.RegistrationToken(s.ctx, scope)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(s.stdout, token)
	return err
}

type pushWorkflow struct {
	repoArg
	Name string `arg:"" help:"The file name under .gitea/workflows/."`
	File string `arg:"" help:"The workflow to commit; - reads stdin."`
}

func (c *pushWorkflow) Run(s *session) error {
	r, err := c.parse()
	if err != nil {
		return err
	}
	var content []byte
	if c.File == "-" {
		content, err = io.ReadAll(s.stdin)
	} else {
		content, err = os.ReadFile(c.File)
	}
	if err != nil {
		return fmt.Errorf("read the workflow: %w", err)
	}
	return s.gitea.PushWorkflow(s.ctx, r, c.Name, content)
}

type jobs struct{ repoArg }

func (c *jobs) Run(s *session) error {
	r, err := c.parse()
	if err != nil {
		return err
	}
	list, err := s.gitea.RepoJobs(s.ctx, r)
	if err != nil {
		return err
	}
	if list == nil {
		list = []giteasetup.Job{}
	}
	return json.NewEncoder(s.stdout).Encode(map[string]any{"jobs": list})
}

func absentIfFalse(ok bool, err error) error {
	if err == nil && !ok {
		return errAbsent
	}
	return err
}

// run parses args, runs the command and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	var c cli
	exit := -1
	parser, err := kong.New(&c,
		kong.Name("gitea-setup"),
		kong.Description("Set Gitea up for the test bed's scripts: organisations, repositories, tokens, workflows, jobs."),
		kong.UsageOnError(),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exit = code }),
	)
	if err != nil {
		fmt.Fprintf(stderr, "gitea-setup: %v\n", err)
		return exitError
	}
	kctx, err := parser.Parse(args)
	if exit >= 0 { // --help
		return exit
	}
	if err != nil {
		fmt.Fprintf(stderr, "gitea-setup: %v\n", err)
		return exitError
	}
	if c.URL == "" {
		c.URL = getenv("GITEA_URL")
	}
	token := getenv("GITEA_ADMIN_TOKEN")
	if c.URL == "" || token == "" {
		fmt.Fprintln(stderr, "gitea-setup: GITEA_URL (or --url) and GITEA_ADMIN_TOKEN must be set; eval \"$(scripts/testbed env)\" sets both")
		return exitError
	}
	s := &session{ctx: ctx, gitea: giteasetup.New(c.URL, token, nil), stdin: stdin, stdout: stdout}
	switch err := kctx.Run(s); {
	case err == nil:
		return exitOK
	case errors.Is(err, errAbsent):
		return exitAbsent
	default:
		fmt.Fprintf(stderr, "gitea-setup: %v\n", err)
		return exitError
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
