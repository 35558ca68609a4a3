package searchproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// docKey names one document: its (concrete) index and id.
type docKey struct{ index, id string }

// docState is what the proxy knows of a document: the version and sequence
// number of its last successful write, and whether that write deleted it
// (a tombstone, kept for good: OpenSearch keeps them for index.gc_deletes).
type docState struct {
	Version int64
	SeqNo   int64
	Deleted bool
}

// store holds the documents' versions and the aliases, in memory and, with
// a file, in an append-only log of JSON lines replayed (and compacted) on
// open. The log survives a restart of the engine (the proxy keeps it) and
// of the whole stack (it lives in the stack's data folder).
type store struct {
	mu      sync.Mutex
	docs    map[docKey]docState
	seq     map[string]int64           // last sequence number per index
	aliases map[string]map[string]bool // alias → its indexes
	strict  map[string]map[string]bool // index with "dynamic": "strict" → its field paths
	file    *os.File                   // nil: in memory only

	locksMu sync.Mutex
	locks   map[docKey]*keyLock
}

// record is one line of the state log.
type record struct {
	Op      string `json:"op"` // "doc", "alias", "unalias", "strict", "drop"
	Index   string `json:"i"`
	ID      string `json:"id,omitempty"`
	Version int64  `json:"v,omitempty"`
	SeqNo   int64  `json:"s,omitempty"`
	Deleted bool   `json:"d,omitempty"`
	Alias   string `json:"a,omitempty"`
	// Fields are a strict index's field paths ("strict").
	Fields []string `json:"f,omitempty"`
}

func openStore(path string) (*store, error) {
	s := &store{docs: map[docKey]docState{}, seq: map[string]int64{}, aliases: map[string]map[string]bool{}, strict: map[string]map[string]bool{}, locks: map[docKey]*keyLock{}}
	if path == "" {
		return s, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("searchproxy: state folder: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("searchproxy: read state: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A torn last line (the proxy killed mid-write): the write it
			// records was never acknowledged.
			continue
		}
		s.apply(r)
	}
	if err := s.compact(path); err != nil {
		return nil, err
	}
	return s, nil
}

// compact rewrites the log as one record per document and alias, then
// keeps it open for appending.
func (s *store) compact(path string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, k := range slices.SortedFunc(maps.Keys(s.docs), compareKeys) {
		d := s.docs[k]
		_ = enc.Encode(record{Op: "doc", Index: k.index, ID: k.id, Version: d.Version, SeqNo: d.SeqNo, Deleted: d.Deleted})
	}
	for _, a := range slices.Sorted(maps.Keys(s.aliases)) {
		for _, i := range slices.Sorted(maps.Keys(s.aliases[a])) {
			_ = enc.Encode(record{Op: "alias", Alias: a, Index: i})
		}
	}
	for _, i := range slices.Sorted(maps.Keys(s.strict)) {
		_ = enc.Encode(record{Op: "strict", Index: i, Fields: slices.Sorted(maps.Keys(s.strict[i]))})
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("searchproxy: write state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("searchproxy: write state: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("searchproxy: open state: %w", err)
	}
	s.file = f
	return nil
}

func compareKeys(a, b docKey) int {
	if a.index != b.index {
		if a.index < b.index {
			return -1
		}
		return 1
	}
	switch {
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// apply changes the state by one record; the caller holds mu (or owns s).
func (s *store) apply(r record) {
	switch r.Op {
	case "doc":
		k := docKey{r.Index, r.ID}
		s.docs[k] = docState{Version: r.Version, SeqNo: r.SeqNo, Deleted: r.Deleted}
		s.seq[r.Index] = max(s.seq[r.Index], r.SeqNo)
	case "alias":
		if s.aliases[r.Alias] == nil {
			s.aliases[r.Alias] = map[string]bool{}
		}
		s.aliases[r.Alias][r.Index] = true
	case "unalias":
		delete(s.aliases[r.Alias], r.Index)
		if len(s.aliases[r.Alias]) == 0 {
			delete(s.aliases, r.Alias)
		}
	case "strict":
		fields := map[string]bool{}
		for _, f := range r.Fields {
			fields[f] = true
		}
		s.strict[r.Index] = fields
	case "drop":
		delete(s.strict, r.Index)
		for k := range s.docs {
			if k.index == r.Index {
				delete(s.docs, k)
			}
		}
		delete(s.seq, r.Index)
		for a, indexes := range s.aliases {
			delete(indexes, r.Index)
			if len(indexes) == 0 {
				delete(s.aliases, a)
			}
		}
	}
}

// commit applies records and appends them to the log.
func (s *store) commit(rs ...record) error {
	if len(rs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		s.apply(r)
	}
	if s.file == nil {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range rs {
		_ = enc.Encode(r)
	}
	if _, err := s.file.Write(b.Bytes()); err != nil {
		return fmt.Errorf("searchproxy: write state: %w", err)
	}
	return nil
}

func (s *store) doc(k docKey) (docState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[k]
	return d, ok
}

// nextSeq reserves the index's next sequence number.
func (s *store) nextSeq(index string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq[index]++
	return s.seq[index]
}

// resolve returns the indexes an alias points at, sorted, or name itself.
func (s *store) resolve(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if indexes, ok := s.aliases[name]; ok {
		return slices.Sorted(maps.Keys(indexes))
	}
	return []string{name}
}

// strictFields returns a strict index's field paths; nil for an index
// that takes any field.
func (s *store) strictFields(index string) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.strict[index]
}

func (s *store) isAlias(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.aliases[name]
	return ok
}

// aliasMap returns each alias's indexes, sorted.
func (s *store) aliasMap() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]string, len(s.aliases))
	for a, indexes := range s.aliases {
		out[a] = slices.Sorted(maps.Keys(indexes))
	}
	return out
}

func (s *store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	return err
}

// keyLock serializes the writes of one document across concurrent bulks.
type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes the locks of keys in a fixed order (so two bulks never wait
// for each other in a cycle) and returns their release.
func (s *store) lock(keys []docKey) (unlock func()) {
	keys = slices.SortedFunc(slices.Values(keys), compareKeys)
	keys = slices.Compact(keys)
	held := make([]*keyLock, 0, len(keys))
	for _, k := range keys {
		s.locksMu.Lock()
		l := s.locks[k]
		if l == nil {
			l = &keyLock{}
			s.locks[k] = l
		}
		l.refs++
		s.locksMu.Unlock()
		l.mu.Lock()
		held = append(held, l)
	}
	return func() {
		for i, l := range held {
			l.mu.Unlock()
			s.locksMu.Lock()
			if l.refs--; l.refs == 0 {
				delete(s.locks, keys[i])
			}
			s.locksMu.Unlock()
		}
	}
}
