package scaler

// passKept is what a loop remembers from pass to pass, by key: a value a
// pass uses is kept for that pass and the next, so one no pass uses any
// more (a deleted group's, an older generation's) goes after one more
// pass. It does not lock: its owner does.
type passKept[K comparable, V any] struct {
	cur, prev map[K]V
}

// turn starts a pass.
func (p *passKept[K, V]) turn() {
	p.prev, p.cur = p.cur, map[K]V{}
}

// get returns the value kept under key for which valid holds, and keeps it
// for this pass too.
func (p *passKept[K, V]) get(key K, valid func(V) bool) (V, bool) {
	for _, m := range []map[K]V{p.cur, p.prev} {
		if v, ok := m[key]; ok && valid(v) {
			p.keep(key, v)
			return v, true
		}
	}
	var zero V
	return zero, false
}

// keep keeps v under key for this pass and the next.
func (p *passKept[K, V]) keep(key K, v V) {
	if p.cur == nil {
		p.cur = map[K]V{}
	}
	p.cur[key] = v
}
