package webhook

import (
	"container/list"
	"sync"
)

// recent remembers the last keys it was asked about, at most max of them,
// forgetting the least recently seen first.
type recent struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recent
	keys  map[string]*list.Element
}

func newRecent(max int) *recent {
	return &recent{max: max, order: list.New(), keys: map[string]*list.Element{}}
}

// seen reports whether key was remembered, and remembers it.
func (r *recent) seen(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.keys[key]; ok {
		r.order.MoveToFront(e)
		return true
	}
	r.keys[key] = r.order.PushFront(key)
	if r.order.Len() > r.max {
		oldest := r.order.Back()
		r.order.Remove(oldest)
		delete(r.keys, oldest.Value.(string))
	}
	return false
}

func (r *recent) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.order.Len()
}
