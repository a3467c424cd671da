package steeredrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	pingv1 "code.gitea.io/actions-proto-go/ping/v1"
	"code.gitea.io/actions-proto-go/ping/v1/pingv1connect"
	runnerv1 "code.gitea.io/actions-proto-go/runner/v1"
	"code.gitea.io/actions-proto-go/runner/v1/runnerv1connect"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Version is what the runner reports to Gitea as its version.
const Version = "testbed-test-runner"

// ErrIdle is returned when no task came before the idle timeout.
var ErrIdle = errors.New("no task before the idle timeout")

var resultByName = map[string]runnerv1.Result{
	"success":   runnerv1.Result_RESULT_SUCCESS,
	"failure":   runnerv1.Result_RESULT_FAILURE,
	"cancelled": runnerv1.Result_RESULT_CANCELLED,
	"skipped":   runnerv1.Result_RESULT_SKIPPED,
}

// Runner is one registered test runner.
type Runner struct {
	cfg    Config
	log    *slog.Logger
	http   *http.Client
	ping   pingv1connect.PingServiceClient
	runner runnerv1connect.RunnerServiceClient

	mu    sync.Mutex
	uuid  string
	token string
}

// New builds a runner that talks to cfg.InstanceURL with the given HTTP client.
func New(cfg Config, log *slog.Logger, httpClient *http.Client) *Runner {
	r := &Runner{cfg: cfg, log: log, http: httpClient}
	base := cfg.InstanceURL + "/api/actions"
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(r.authenticate))
	r.ping = pingv1connect.NewPingServiceClient(httpClient, base)
	r.runner = runnerv1connect.NewRunnerServiceClient(httpClient, base, auth)
	return r
}

// authenticate adds the credentials Gitea handed out at registration to every call
// after Register; Gitea's runner interceptor rejects calls without them.
func (r *Runner) authenticate(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		r.mu.Lock()
		uuid, token := r.uuid, r.token
		r.mu.Unlock()
		if uuid != "" {
			req.Header().Set("x-runner-uuid", uuid)
			req.Header().Set("x-runner-token", token)
		}
		return next(ctx, req)
	}
}

// Run registers the runner and serves tasks until it is done: after one task when
// ephemeral, otherwise until it has been idle for the idle timeout. Cancelling ctx is
// a SIGTERM: a held task is then ended as cfg.OnTerm says.
func (r *Runner) Run(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.IdleTimeout)
	r.log.Info("starting", "url", r.cfg.InstanceURL, "name", r.cfg.Name, "labels", r.cfg.Labels, "ephemeral", r.cfg.Ephemeral)

	if err := r.retryUntil(ctx, deadline, "ping", func(ctx context.Context) error {
		_, err := r.ping.Ping(ctx, connect.NewRequest(&pingv1.PingRequest{Data: r.cfg.Name}))
		return err
	}); err != nil {
		return err
	}

	var reg *runnerv1.RegisterResponse
	if err := r.retryUntil(ctx, deadline, "register", func(ctx context.Context) error {
		resp, err := r.runner.Register(ctx, connect.NewRequest(&runnerv1.RegisterRequest{
			Name:      r.cfg.Name,
			Token:     r.cfg.RegistrationToken,
			Version:   Version,
			Labels:    r.cfg.Labels,
			Ephemeral: r.cfg.Ephemeral,
		}))
		if err == nil {
			reg = resp.Msg
		}
		return err
	}); err != nil {
		return err
	}
	r.mu.Lock()
	r.uuid, r.token = reg.GetRunner().GetUuid(), reg.GetRunner().GetToken()
	r.mu.Unlock()
	r.log.Info("registered", "runner_id", reg.GetRunner().GetId(), "uuid", reg.GetRunner().GetUuid())

	if _, err := r.runner.Declare(ctx, connect.NewRequest(&runnerv1.DeclareRequest{
		Version: Version,
		Labels:  r.cfg.Labels,
	})); err != nil {
		return fmt.Errorf("declare: %w", err)
	}
	r.log.Info("declared", "labels", r.cfg.Labels)

	var tasksVersion int64
	done := 0
	for {
		if time.Now().After(deadline) {
			if done > 0 {
				r.log.Info("idle timeout after tasks, exiting", "tasks", done)
				return nil
			}
			return ErrIdle
		}
		resp, err := r.runner.FetchTask(ctx, connect.NewRequest(&runnerv1.FetchTaskRequest{TasksVersion: tasksVersion}))
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			r.log.Warn("fetch task failed", "err", err)
		case resp.Msg.GetTask() == nil:
			tasksVersion = resp.Msg.GetTasksVersion()
		default:
			// A fetched task changes what Gitea has to offer; ask afresh next time.
			tasksVersion = 0
			if err := r.serve(ctx, resp.Msg.GetTask()); err != nil {
				return err
			}
			done++
			if r.cfg.Ephemeral {
				r.log.Info("ephemeral runner done")
				return nil
			}
			deadline = time.Now().Add(r.cfg.IdleTimeout)
			continue
		}
		if err := sleep(ctx, r.cfg.FetchInterval); err != nil {
			return err
		}
	}
}

// retryUntil calls f until it succeeds, ctx ends or the deadline passes. Only errors
// that a starting Gitea gives (unreachable, unavailable) are retried.
func (r *Runner) retryUntil(ctx context.Context, deadline time.Time, what string, f func(context.Context) error) error {
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		// Gitea answers a bad token with a plain error (CodeUnknown): that is final.
		code := connect.CodeOf(err)
		if code != connect.CodeUnavailable && code != connect.CodeDeadlineExceeded {
			return fmt.Errorf("%s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: gave up at the idle timeout: %w", what, err)
		}
		r.log.Warn(what+" failed, retrying", "err", err)
		if err := sleep(ctx, r.cfg.FetchInterval); err != nil {
			return err
		}
	}
}

// taskInfo is what the runner knows about a task it took.
type taskInfo struct {
	ID         int64
	RunID      string
	JobKey     string
	Repository string
	// GiteaJobID is the id of the job in Gitea's REST API (0 when it could not be found).
	GiteaJobID int64
}

func (r *Runner) describe(ctx context.Context, task *runnerv1.Task) taskInfo {
	ctxFields := task.GetContext().GetFields()
	info := taskInfo{
		ID:         task.GetId(),
		RunID:      ctxFields["run_id"].GetStringValue(),
		JobKey:     ctxFields["job"].GetStringValue(),
		Repository: ctxFields["repository"].GetStringValue(),
	}
	id, err := r.lookupJobID(ctx, info, ctxFields["token"].GetStringValue())
	if err != nil {
		r.log.Warn("cannot find the Gitea job id of the task", "task_id", info.ID, "err", err)
	}
	info.GiteaJobID = id
	return info
}

// lookupJobID finds the REST id of the job this runner took. The task carries only
// the run id and the job's key, so ask Gitea for the run's jobs (with the task's own
// token, which can read its repository) and pick the one assigned to this runner.
func (r *Runner) lookupJobID(ctx context.Context, info taskInfo, token string) (int64, error) {
	if info.Repository == "" || info.RunID == "" || token == "" {
		return 0, errors.New("the task context lacks repository, run_id or token")
	}
	owner, repo, ok := strings.Cut(info.Repository, "/")
	if !ok {
		return 0, fmt.Errorf("repository %q is not owner/name", info.Repository)
	}
	u := fmt.Sprintf("%s/api/v1/repos/%s/%s/actions/runs/%s/jobs", r.cfg.InstanceURL,
		url.PathEscape(owner), url.PathEscape(repo), url.PathEscape(info.RunID))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET run jobs: %s", resp.Status)
	}
	var body struct {
		Jobs []struct {
			ID         int64  `json:"id"`
			RunnerName string `json:"runner_name"`
			Status     string `json:"status"`
		} `json:"jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("decode run jobs: %w", err)
	}
	for _, j := range body.Jobs {
		if j.RunnerName == r.cfg.Name && j.Status == "in_progress" {
			return j.ID, nil
		}
	}
	return 0, fmt.Errorf("no in-progress job of run %s is assigned to %s", info.RunID, r.cfg.Name)
}

// HoldFiles lists the files, relative to the hold directory, whose presence keeps
// the task running: "all", "job-<Gitea job id>", "task-<task id>", "run-<run id>"
// and "name-<job key>".
func HoldFiles(info taskInfo) []string {
	files := []string{"all", "task-" + strconv.FormatInt(info.ID, 10)}
	if info.GiteaJobID != 0 {
		files = append(files, "job-"+strconv.FormatInt(info.GiteaJobID, 10))
	}
	if info.RunID != "" {
		files = append(files, "run-"+info.RunID)
	}
	if info.JobKey != "" {
		files = append(files, "name-"+info.JobKey)
	}
	return files
}

// holdReason says why the task must stay in progress now, or "" to let it finish. A
// job whose key starts with "hold" is held until the runner stops or the hold times
// out; any other is held while one of its hold files exists.
func (r *Runner) holdReason(info taskInfo) string {
	if strings.HasPrefix(info.JobKey, "hold") {
		return "job key " + info.JobKey
	}
	if r.cfg.HoldFile != "" && exists(r.cfg.HoldFile) {
		return r.cfg.HoldFile
	}
	if r.cfg.HoldDir != "" {
		for _, f := range HoldFiles(info) {
			if p := filepath.Join(r.cfg.HoldDir, f); exists(p) {
				return p
			}
		}
	}
	return ""
}

// resultFor is the result to report: a job key starting with "fail" fails, the rest
// report the configured result.
func (r *Runner) resultFor(info taskInfo) runnerv1.Result {
	if strings.HasPrefix(info.JobKey, "fail") {
		return runnerv1.Result_RESULT_FAILURE
	}
	return resultByName[r.cfg.Result]
}

// serve runs one task: hold it while asked to, then log and report its result.
func (r *Runner) serve(ctx context.Context, task *runnerv1.Task) error {
	started := time.Now()
	info := r.describe(ctx, task)
	log := r.log.With("task_id", info.ID, "gitea_job_id", info.GiteaJobID, "run_id", info.RunID, "job", info.JobKey, "repository", info.Repository)
	log.Info("took task", "hold_files", HoldFiles(info))
	logs := []string{fmt.Sprintf("test runner %s took task %d (job %q)", r.cfg.Name, info.ID, info.JobKey)}

	holdUntil := started.Add(r.cfg.HoldTimeout)
	for reason := r.holdReason(info); reason != ""; reason = r.holdReason(info) {
		if time.Now().After(holdUntil) {
			log.Warn("hold timed out, finishing", "hold_timeout", r.cfg.HoldTimeout)
			logs = append(logs, "hold timed out")
			break
		}
		resp, err := r.runner.UpdateTask(ctx, connect.NewRequest(&runnerv1.UpdateTaskRequest{
			State: &runnerv1.TaskState{Id: info.ID, StartedAt: timestamppb.New(started)},
		}))
		if err != nil && ctx.Err() == nil {
			log.Warn("heartbeat failed", "err", err)
		}
		if err == nil && resp.Msg.GetState().GetResult() == runnerv1.Result_RESULT_CANCELLED {
			log.Info("Gitea cancelled the task")
			return nil
		}
		if ctx.Err() != nil {
			return r.terminate(info, started, logs, log)
		}
		log.Debug("holding task", "reason", reason)
		if sleep(ctx, r.cfg.HeartbeatInterval) != nil {
			return r.terminate(info, started, logs, log)
		}
	}
	logs = append(logs, "done")
	return r.finish(ctx, info, started, r.resultFor(info), logs, log)
}

// terminate ends a task when the runner is stopped in the middle of it.
func (r *Runner) terminate(info taskInfo, started time.Time, logs []string, log *slog.Logger) error {
	if r.cfg.OnTerm == "abandon" {
		log.Info("terminated, abandoning the task")
		return context.Canceled
	}
	// The run's context is gone; report with a short one of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.finish(ctx, info, started, runnerv1.Result_RESULT_FAILURE, append(logs, "terminated"), log); err != nil {
		return err
	}
	return context.Canceled
}

func (r *Runner) finish(ctx context.Context, info taskInfo, started time.Time, result runnerv1.Result, lines []string, log *slog.Logger) error {
	now := time.Now()
	rows := make([]*runnerv1.LogRow, len(lines))
	for i, l := range lines {
		rows[i] = &runnerv1.LogRow{Time: timestamppb.New(now), Content: l}
	}
	if _, err := r.runner.UpdateLog(ctx, connect.NewRequest(&runnerv1.UpdateLogRequest{
		TaskId: info.ID, Index: 0, Rows: rows, NoMore: true,
	})); err != nil {
		// The log is a courtesy; the result below is what Gitea's job state follows.
		log.Warn("update log failed", "err", err)
	}
	if _, err := r.runner.UpdateTask(ctx, connect.NewRequest(&runnerv1.UpdateTaskRequest{
		State: &runnerv1.TaskState{
			Id:        info.ID,
			Result:    result,
			StartedAt: timestamppb.New(started),
			StoppedAt: timestamppb.New(now),
		},
	})); err != nil {
		return fmt.Errorf("report result of task %d: %w", info.ID, err)
	}
	log.Info("reported result", "result", result.String(), "took", time.Since(started).Round(time.Millisecond))
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
