// Package steeredrunner is a runner that tests steer: it speaks Gitea's real runner
// protocol but runs no steps: it registers, takes one task, optionally holds it while a
// test wants the job to stay in progress, and reports a result.
package steeredrunner

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is what the runner reads from its environment. The GITEA_* names are the ones
// the scaler sets on runner pods (and act_runner reads); TEST_RUNNER_* are test controls.
type Config struct {
	InstanceURL       string
	RegistrationToken string
	Name              string
	// Labels are the label names declared to Gitea; "name:docker://image" entries are
	// reduced to "name", as act_runner does.
	Labels    []string
	Ephemeral bool

	// IdleTimeout bounds how long the runner waits for Gitea and for a task.
	IdleTimeout time.Duration
	// FetchInterval is the pause between two FetchTask calls that returned no task.
	FetchInterval time.Duration
	// HoldDir holds the files that keep a task running; see HoldReasons.
	HoldDir string
	// HoldFile, when set, keeps every task running while that file exists.
	HoldFile string
	// HoldTimeout bounds a hold, so a forgotten file never keeps a runner forever.
	HoldTimeout time.Duration
	// HeartbeatInterval is the pause between two UpdateTask calls while a task is held.
	HeartbeatInterval time.Duration
	// Result is the result reported when the job's name does not ask for another.
	Result string
	// OnTerm says what a SIGTERM does to a task in progress: "fail" reports failure,
	// "abandon" leaves it to Gitea (as a killed runner would).
	OnTerm string
}

// Getenv is os.Getenv's signature, so tests can pass a map.
type Getenv func(string) string

// LoadConfig reads the configuration from the environment and checks it.
func LoadConfig(getenv Getenv) (Config, error) {
	c := Config{
		InstanceURL:       strings.TrimRight(getenv("GITEA_INSTANCE_URL"), "/"),
		RegistrationToken: getenv("GITEA_RUNNER_REGISTRATION_TOKEN"),
		Name:              getenv("GITEA_RUNNER_NAME"),
		Labels:            LabelNames(getenv("GITEA_RUNNER_LABELS")),
		HoldDir:           getenv("TEST_RUNNER_HOLD_DIR"),
		HoldFile:          getenv("TEST_RUNNER_HOLD_FILE"),
		Result:            valueOr(getenv("TEST_RUNNER_RESULT"), "success"),
		OnTerm:            valueOr(getenv("TEST_RUNNER_ON_TERM"), "fail"),
	}
	if c.InstanceURL == "" {
		return c, fmt.Errorf("GITEA_INSTANCE_URL is required")
	}
	if c.RegistrationToken == "" {
		return c, fmt.Errorf("GITEA_RUNNER_REGISTRATION_TOKEN is required")
	}
	if c.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("GITEA_RUNNER_NAME is empty and the host name is unknown: %w", err)
		}
		c.Name = host
	}
	if len(c.Labels) == 0 {
		// act_runner falls back to its default labels; ubuntu-latest is the one workflows use.
		c.Labels = []string{"ubuntu-latest"}
	}
	var err error
	if c.Ephemeral, err = parseBool(getenv, "GITEA_RUNNER_EPHEMERAL", false); err != nil {
		return c, err
	}
	durations := []struct {
		name string
		dst  *time.Duration
		def  time.Duration
	}{
		{"TEST_RUNNER_IDLE_TIMEOUT", &c.IdleTimeout, 120 * time.Second},
		{"TEST_RUNNER_FETCH_INTERVAL", &c.FetchInterval, time.Second},
		{"TEST_RUNNER_HOLD_TIMEOUT", &c.HoldTimeout, 15 * time.Minute},
		{"TEST_RUNNER_HEARTBEAT_INTERVAL", &c.HeartbeatInterval, 2 * time.Second},
	}
	for _, d := range durations {
		if *d.dst, err = parseDuration(getenv, d.name, d.def); err != nil {
			return c, err
		}
	}
	if _, ok := resultByName[c.Result]; !ok {
		return c, fmt.Errorf("TEST_RUNNER_RESULT %q: want success, failure, cancelled or skipped", c.Result)
	}
	if c.OnTerm != "fail" && c.OnTerm != "abandon" {
		return c, fmt.Errorf("TEST_RUNNER_ON_TERM %q: want fail or abandon", c.OnTerm)
	}
	return c, nil
}

// LabelNames turns act_runner's label list ("name" or "name:schema://image", comma
// separated) into the names a runner declares.
func LabelNames(s string) []string {
	var names []string
	seen := map[string]bool{}
	for _, l := range strings.Split(s, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(l), ":")
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	return names
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func parseBool(getenv Getenv, name string, def bool) (bool, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", name, v, err)
	}
	return b, nil
}

func parseDuration(getenv Getenv, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		// Plain numbers are seconds, which is what a shell user types first.
		if n, nerr := strconv.Atoi(v); nerr == nil {
			return time.Duration(n) * time.Second, nil
		}
		return 0, fmt.Errorf("%s %q: %w", name, v, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s %q: must be positive", name, v)
	}
	return d, nil
}
