package plan

import "sort"

// Registration is a runner registered in the group's Gitea scope.
type Registration struct {
	ID   int64
	Name string
	// Job is the runner Job whose runner registered under Name, when Name
	// is one the group makes (its prefix, a random suffix and its owner
	// tag); empty for every other runner.
	Job       string
	Ephemeral bool
	// Online is Gitea's status: the runner contacted Gitea within the last
	// minute.
	Online bool
	// Busy is true when an in_progress job carries its name.
	Busy bool
}

// Orphans names the registrations to remove: ephemeral runners of this
// group whose runner Job is not listed, that run no job and that Gitea has
// not heard from for a minute (their process is gone, so none can take a
// job while it is removed, and none is a runner registering right now).
// Non-ephemeral runners, runners of other groups or namespaces (another
// owner tag) and runners the group did not name are never named. The
// caller confirms that the Job is gone before it acts.
func Orphans(regs []Registration, listed map[string]bool) []Registration {
	var out []Registration
	for _, r := range regs {
		if r.Job != "" && r.Ephemeral && !listed[r.Job] && !r.Online && !r.Busy {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
