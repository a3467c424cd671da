package steeredrunner

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	pingv1 "code.gitea.io/actions-proto-go/ping/v1"
	"code.gitea.io/actions-proto-go/ping/v1/pingv1connect"
	runnerv1 "code.gitea.io/actions-proto-go/runner/v1"
	"code.gitea.io/actions-proto-go/runner/v1/runnerv1connect"
	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"
)

// fakeGitea records what a runner tells it and hands out at most one task.
type fakeGitea struct {
	runnerv1connect.UnimplementedRunnerServiceHandler
	pingv1connect.UnimplementedPingServiceHandler

	mu         sync.Mutex
	task       *runnerv1.Task
	registered *runnerv1.RegisterRequest
	declared   []string
	heartbeats int
	results    []runnerv1.Result
	logs       []string
	badHeaders int
	cancel     bool
}

func (f *fakeGitea) Ping(_ context.Context, req *connect.Request[pingv1.PingRequest]) (*connect.Response[pingv1.PingResponse], error) {
	return connect.NewResponse(&pingv1.PingResponse{Data: "hello " + req.Msg.Data}), nil
}

func (f *fakeGitea) Register(_ context.Context, req *connect.Request[runnerv1.RegisterRequest]) (*connect.Response[runnerv1.RegisterResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registered = req.Msg
	return connect.NewResponse(&runnerv1.RegisterResponse{Runner: &runnerv1.Runner{Id: 7, Uuid: "uuid-7", Token: "secret-7", Name: req.Msg.Name}}), nil
}

func (f *fakeGitea) checkHeaders(h http.Header) {
	if h.Get("x-runner-uuid") != "uuid-7" || h.Get("x-runner-token") != "secret-7" {
		f.badHeaders++
	}
}

func (f *fakeGitea) Declare(_ context.Context, req *connect.Request[runnerv1.DeclareRequest]) (*connect.Response[runnerv1.DeclareResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkHeaders(req.Header())
	f.declared = req.Msg.Labels
	return connect.NewResponse(&runnerv1.DeclareResponse{}), nil
}

func (f *fakeGitea) FetchTask(_ context.Context, req *connect.Request[runnerv1.FetchTaskRequest]) (*connect.Response[runnerv1.FetchTaskResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkHeaders(req.Header())
	t := f.task
	f.task = nil
	return connect.NewResponse(&runnerv1.FetchTaskResponse{Task: t, TasksVersion: 3}), nil
}

func (f *fakeGitea) UpdateTask(_ context.Context, req *connect.Request[runnerv1.UpdateTaskRequest]) (*connect.Response[runnerv1.UpdateTaskResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkHeaders(req.Header())
	result := req.Msg.State.Result
	if result == runnerv1.Result_RESULT_UNSPECIFIED {
		f.heartbeats++
		if f.cancel {
			result = runnerv1.Result_RESULT_CANCELLED
		}
	} else {
		f.results = append(f.results, result)
	}
	return connect.NewResponse(&runnerv1.UpdateTaskResponse{State: &runnerv1.TaskState{Id: req.Msg.State.Id, Result: result}}), nil
}

func (f *fakeGitea) UpdateLog(_ context.Context, req *connect.Request[runnerv1.UpdateLogRequest]) (*connect.Response[runnerv1.UpdateLogResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range req.Msg.Rows {
		f.logs = append(f.logs, r.Content)
	}
	return connect.NewResponse(&runnerv1.UpdateLogResponse{AckIndex: int64(len(req.Msg.Rows))}), nil
}

func (f *fakeGitea) snapshot() (heartbeats int, results []runnerv1.Result, badHeaders int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats, append([]runnerv1.Result(nil), f.results...), f.badHeaders
}

func newTask(t *testing.T, jobKey string) *runnerv1.Task {
	t.Helper()
	ctx, err := structpb.NewStruct(map[string]any{
		"run_id": "5", "job": jobKey, "repository": "smoke/app", "token": "task-token",
	})
	require.NoError(t, err)
	return &runnerv1.Task{Id: 11, Context: ctx}
}

// start serves the fake runner API plus the REST call that finds the job id (42).
func start(t *testing.T, f *fakeGitea) string {
	t.Helper()
	mux := http.NewServeMux()
	path, h := runnerv1connect.NewRunnerServiceHandler(f)
	mux.Handle("/api/actions"+path, http.StripPrefix("/api/actions", h))
	path, h = pingv1connect.NewPingServiceHandler(f)
	mux.Handle("/api/actions"+path, http.StripPrefix("/api/actions", h))
	mux.HandleFunc("/api/v1/repos/smoke/app/actions/runs/5/jobs", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token task-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"jobs":[{"id":41,"runner_name":"other","status":"in_progress"},{"id":42,"runner_name":"r1","status":"in_progress"}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func testConfig(url string) Config {
	return Config{
		InstanceURL: url, RegistrationToken: "reg", Name: "r1", Labels: []string{"ubuntu-latest", "self"},
		Ephemeral: true, IdleTimeout: 3 * time.Second, FetchInterval: 20 * time.Millisecond,
		HoldTimeout: 5 * time.Second, HeartbeatInterval: 20 * time.Millisecond, Result: "success", OnTerm: "fail",
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestRunReportsResult(t *testing.T) {
	tests := map[string]struct {
		jobKey string
		result string
		want   runnerv1.Result
	}{
		"plain job succeeds":           {jobKey: "build", result: "success", want: runnerv1.Result_RESULT_SUCCESS},
		"fail prefix fails":            {jobKey: "fail-build", result: "success", want: runnerv1.Result_RESULT_FAILURE},
		"configured result is honored": {jobKey: "build", result: "cancelled", want: runnerv1.Result_RESULT_CANCELLED},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeGitea{task: newTask(t, tc.jobKey)}
			cfg := testConfig(start(t, f))
			cfg.Result = tc.result
			require.NoError(t, New(cfg, quietLog(), http.DefaultClient).Run(context.Background()))

			_, results, bad := f.snapshot()
			assert.Equal(t, []runnerv1.Result{tc.want}, results)
			assert.Zero(t, bad, "calls after Register must carry the runner's credentials")
			assert.True(t, f.registered.Ephemeral)
			assert.Equal(t, []string{"ubuntu-latest", "self"}, f.registered.Labels)
			assert.Equal(t, []string{"ubuntu-latest", "self"}, f.declared)
			assert.NotEmpty(t, f.logs)
		})
	}
}

func TestRunGivesUpWhenIdle(t *testing.T) {
	f := &fakeGitea{}
	cfg := testConfig(start(t, f))
	cfg.IdleTimeout = 200 * time.Millisecond
	assert.ErrorIs(t, New(cfg, quietLog(), http.DefaultClient).Run(context.Background()), ErrIdle)
}

func TestRunHoldsWhileHoldFileExists(t *testing.T) {
	for _, file := range []string{"job-42", "name-build", "run-5", "task-11", "all"} {
		t.Run(file, func(t *testing.T) {
			f := &fakeGitea{task: newTask(t, "build")}
			cfg := testConfig(start(t, f))
			cfg.HoldDir = t.TempDir()
			hold := filepath.Join(cfg.HoldDir, file)
			require.NoError(t, os.WriteFile(hold, nil, 0o600))

			errc := make(chan error, 1)
			go func() { errc <- New(cfg, quietLog(), http.DefaultClient).Run(context.Background()) }()
			require.Eventually(t, func() bool { hb, _, _ := f.snapshot(); return hb >= 3 }, 5*time.Second, 10*time.Millisecond)
			_, results, _ := f.snapshot()
			assert.Empty(t, results, "a held task must not report a result")

			require.NoError(t, os.Remove(hold))
			require.NoError(t, <-errc)
			_, results, _ = f.snapshot()
			assert.Equal(t, []runnerv1.Result{runnerv1.Result_RESULT_SUCCESS}, results)
		})
	}
}

func TestRunFailsHeldTaskOnTerm(t *testing.T) {
	f := &fakeGitea{task: newTask(t, "hold-forever")}
	cfg := testConfig(start(t, f))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- New(cfg, quietLog(), http.DefaultClient).Run(ctx) }()
	require.Eventually(t, func() bool { hb, _, _ := f.snapshot(); return hb >= 2 }, 5*time.Second, 10*time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	_, results, _ := f.snapshot()
	assert.Equal(t, []runnerv1.Result{runnerv1.Result_RESULT_FAILURE}, results)
}

func TestRunStopsWhenGiteaCancels(t *testing.T) {
	f := &fakeGitea{task: newTask(t, "hold-forever"), cancel: true}
	cfg := testConfig(start(t, f))
	require.NoError(t, New(cfg, quietLog(), http.DefaultClient).Run(context.Background()))
	_, results, _ := f.snapshot()
	assert.Empty(t, results, "a cancelled task needs no result")
}

func TestLoadConfig(t *testing.T) {
	base := map[string]string{
		"GITEA_INSTANCE_URL":              "http://127.0.0.1:3000/",
		"GITEA_RUNNER_REGISTRATION_TOKEN": "tok",
		"GITEA_RUNNER_NAME":               "grp-abcde",
		"GITEA_RUNNER_LABELS":             "ubuntu-latest:docker://node:20,self, ubuntu-latest",
		"GITEA_RUNNER_EPHEMERAL":          "true",
	}
	tests := map[string]struct {
		override map[string]string
		check    func(t *testing.T, c Config)
		wantErr  assert.ErrorAssertionFunc
	}{
		"defaults and label names": {
			check: func(t *testing.T, c Config) {
				assert.Equal(t, "http://127.0.0.1:3000", c.InstanceURL)
				assert.Equal(t, []string{"ubuntu-latest", "self"}, c.Labels)
				assert.True(t, c.Ephemeral)
				assert.Equal(t, 120*time.Second, c.IdleTimeout)
			},
			wantErr: assert.NoError,
		},
		"idle timeout in seconds": {
			override: map[string]string{"TEST_RUNNER_IDLE_TIMEOUT": "5"},
			check:    func(t *testing.T, c Config) { assert.Equal(t, 5*time.Second, c.IdleTimeout) },
			wantErr:  assert.NoError,
		},
		"missing url":      {override: map[string]string{"GITEA_INSTANCE_URL": ""}, wantErr: assert.Error},
		"missing token":    {override: map[string]string{"GITEA_RUNNER_REGISTRATION_TOKEN": ""}, wantErr: assert.Error},
		"bad ephemeral":    {override: map[string]string{"GITEA_RUNNER_EPHEMERAL": "maybe"}, wantErr: assert.Error},
		"bad result":       {override: map[string]string{"TEST_RUNNER_RESULT": "great"}, wantErr: assert.Error},
		"bad idle timeout": {override: map[string]string{"TEST_RUNNER_IDLE_TIMEOUT": "-1s"}, wantErr: assert.Error},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.override {
				env[k] = v
			}
			c, err := LoadConfig(func(k string) string { return env[k] })
			tc.wantErr(t, err)
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}
