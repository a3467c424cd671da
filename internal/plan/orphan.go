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

// Named is a registration read by its name: the group, runner Job and
// owner tag it was made with (runnerjob.SplitRunnerName), empty when the
// name is not one a group makes.
type Named struct {
	Registration
	Group, Tag string
}

// LeftBehindInput is what the sweep of a deleted group's registrations is
// decided from.
type LeftBehindInput struct {
	// Regs are the registrations of the sweeping group's runners listing.
	Regs []Named
	// Recorded maps the owner tags the namespace's ledger holds for that
	// same Gitea URL and target to their group's name.
	Recorded map[string]string
	// Live maps the names of the namespace's groups now to their owner
	// tag; an empty tag is a group that could not be read, which lives.
	Live map[string]string
}

// LeftBehind names the registrations a deleted group of this namespace
// left in Gitea, and the ledger's tags to forget. A registration goes only
// when its owner tag is recorded in this namespace's ledger for the same
// Gitea scope under the group its name carries, that group is gone (no
// group of that name, or one with another tag: deleted and made again),
// and it is ephemeral, offline and running no job (as Orphans). A tag is
// forgotten once its group is gone and no registration of it is left. A
// runner of another namespace or install is never named: its tag is not in
// this namespace's ledger.
func LeftBehind(in LeftBehindInput) (remove []Registration, forget []string) {
	dead := func(tag string) bool {
		group, ok := in.Recorded[tag]
		live, exists := in.Live[group]
		return ok && !(exists && (live == tag || live == ""))
	}
	left := map[string]bool{}
	for _, r := range in.Regs {
		if r.Tag == "" || !dead(r.Tag) || in.Recorded[r.Tag] != r.Group {
			continue
		}
		if r.Ephemeral && !r.Online && !r.Busy {
			remove = append(remove, r.Registration)
			continue
		}
		left[r.Tag] = true
	}
	for tag := range in.Recorded {
		if dead(tag) && !left[tag] {
			forget = append(forget, tag)
		}
	}
	sort.Slice(remove, func(i, j int) bool { return remove[i].ID < remove[j].ID })
	sort.Strings(forget)
	return remove, forget
}
