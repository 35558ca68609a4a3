package archive

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// world is an in-memory DynamoDB, stream, Lambda and S3 with the behaviour
// the rotator relies on: tables with items and a stream of their changes,
// deletion protection that refuses DeleteTable, subscriptions that deliver
// stream records into the archive (when the world is pumped), and an
// archive of files with real replay and compaction.
type world struct {
	mu      sync.Mutex
	tables  map[string]*memTable
	streams map[string][]streamRec // by stream ARN
	subs    map[string]int         // stream ARN → mappings
	files   map[string][]Row
	// manifests are the partitions' manifests by prefix, as Compact writes them.
	manifests map[string]*Manifest
	seq       int64
	// deliver: subscriptions move stream records into the archive on pump.
	deliver bool
	calls   []string
	// fail makes an operation fail by name: "scan", "read", "compact",
	// "write", "remove" (a subscription), "protect", "warm".
	fail map[string]error
	// noWarm: the tables have no warm throughput, as DynamoDB Local:
	// asked at creation, it is ignored; none is reported; a raise is
	// skipped.
	noWarm bool
	// leases are the months' leases by table; leaseCalls the lease
	// operations, apart from calls; leaseAt, when set, is the time the
	// rotators' leases go by (else the run's time).
	leases     map[string]Lease
	leaseCalls []string
	leaseAt    time.Time
}

type memTable struct {
	Table
	items map[string]Item // key JSON → item
}

type streamRec struct {
	StreamRecord
	row       Row
	delivered bool
}

func newWorld() *world {
	return &world{tables: map[string]*memTable{}, streams: map[string][]streamRec{}, subs: map[string]int{}, files: map[string][]Row{},
		manifests: map[string]*Manifest{}, deliver: true, fail: map[string]error{}, leases: map[string]Lease{}}
}

func (w *world) call(format string, a ...any) {
	w.calls = append(w.calls, fmt.Sprintf(format, a...))
}

// put writes an item to a table at t, as the counter would.
func (w *world) put(table, pk, sk string, votes int, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	mt := w.tables[table]
	item := Item{"pk": pk, "sk": sk, "votes": Number(fmt.Sprint(votes))}
	key, _ := KeyJSON(item, "pk", "sk")
	img, _ := ImageJSON(item)
	name := EventInsert
	if _, ok := mt.items[key]; ok {
		name = EventModify
	}
	mt.items[key] = item
	if !mt.StreamEnabled {
		return
	}
	w.seq++
	seq := fmt.Sprintf("1%020d", w.seq)
	p := PartitionOf(table, t)
	w.streams[mt.StreamARN] = append(w.streams[mt.StreamARN], streamRec{
		StreamRecord: StreamRecord{Shard: "shard-0", SequenceNumber: seq, CreatedAt: t},
		row: Row{Table: p.Table, Month: p.Month, Stream: "s", EventName: name, SequenceNumber: seq,
			ApproximateCreationTime: t, Keys: key, NewImage: img},
	})
}

// pump delivers every undelivered record of subscribed streams, one file
// per call and stream, as the archiver does with a batch.
func (w *world) pump() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.deliver {
		return
	}
	for arn, recs := range w.streams {
		if w.subs[arn] == 0 {
			continue
		}
		var rows []Row
		for i := range recs {
			if !recs[i].delivered {
				recs[i].delivered = true
				rows = append(rows, recs[i].row)
			}
		}
		if len(rows) > 0 {
			p := Partition{Table: rows[0].Table, Month: rows[0].Month}
			w.files[ObjectKey(p, "label", rows[0].SequenceNumber)] = rows
		}
	}
}

func (w *world) table(name string) *memTable {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tables[name]
}

func (w *world) fileKeys(prefix string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []string
	for k := range w.files {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Tables.

type memTables struct{ w *world }

var _ Tables = memTables{}

func (m memTables) List(_ context.Context, base string) ([]Table, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	var out []Table
	for name, t := range m.w.tables {
		if b, _, ok := ledger.SplitTable(name); ok && b == base {
			out = append(out, t.Table)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m memTables) Describe(_ context.Context, name string) (Table, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["describe"]; err != nil {
		return Table{}, err
	}
	t, ok := m.w.tables[name]
	if !ok {
		return Table{}, fmt.Errorf("describe %s: %w", name, ErrNotFound)
	}
	return t.Table, nil
}

func (m memTables) Ensure(_ context.Context, s Spec) (Table, bool, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if t, ok := m.w.tables[s.Name]; ok {
		t.DeletionProtection = true
		return t.Table, false, nil
	}
	m.w.call("create %s", s.Name)
	t := &memTable{Table: Table{Name: s.Name, Status: "ACTIVE", StreamARN: "arn:stream/" + s.Name, StreamEnabled: true,
		DeletionProtection: true, Capacity: s.Capacity}, items: map[string]Item{}}
	if !m.w.noWarm {
		warm := DefaultWarm
		if s.Warm != nil {
			m.w.call("create %s warm %s", s.Name, *s.Warm)
			warm.Read, warm.Write = max(warm.Read, s.Warm.Read), max(warm.Write, s.Warm.Write)
		}
		t.Warm = &warm
	}
	m.w.tables[s.Name] = t
	return t.Table, true, nil
}

// RaiseWarm raises as DynamoDB does: a figure below the table's is refused.
func (m memTables) RaiseWarm(_ context.Context, name string, w Warm) (bool, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["warm"]; err != nil {
		return false, err
	}
	if m.w.noWarm {
		return false, nil
	}
	t := m.w.tables[name]
	if w.Read > 0 && w.Read < t.Warm.Read || w.Write > 0 && w.Write < t.Warm.Write {
		return false, fmt.Errorf("ValidationException: warm throughput %s of %s is below its %s", w, name, *t.Warm)
	}
	m.w.call("raise %s warm %s", name, w)
	warm := *t.Warm
	warm.Read, warm.Write = max(warm.Read, w.Read), max(warm.Write, w.Write)
	t.Warm = &warm
	return true, nil
}

func (m memTables) SetCapacity(_ context.Context, name string, c Capacity) error {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	m.w.call("capacity %s %d/%d", name, c.Read, c.Write)
	m.w.tables[name].Capacity = &c
	return nil
}

func (m memTables) DisableStream(_ context.Context, name string) error {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	m.w.call("disable stream %s", name)
	m.w.tables[name].StreamEnabled = false
	return nil
}

func (m memTables) Protect(_ context.Context, name string, on bool) error {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["protect"]; err != nil {
		return err
	}
	t, ok := m.w.tables[name]
	if !ok {
		return ErrNotFound
	}
	m.w.call("protect %s %v", name, on)
	t.DeletionProtection = on
	return nil
}

func (m memTables) Delete(_ context.Context, name string) error {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	t, ok := m.w.tables[name]
	if !ok {
		return ErrNotFound
	}
	if t.DeletionProtection {
		return fmt.Errorf("table %s: deletion protection is on", name)
	}
	m.w.call("delete %s", name)
	delete(m.w.tables, name)
	return nil
}

func (m memTables) Scan(_ context.Context, name string, keepImages bool) (Scan, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["scan"]; err != nil {
		return Scan{}, err
	}
	t, ok := m.w.tables[name]
	if !ok {
		return Scan{}, ErrNotFound
	}
	s := Scan{State: State{}, Segments: 1}
	if keepImages {
		s.Images = map[string]string{}
	}
	for k, item := range t.items {
		sum, err := Checksum(item)
		if err != nil {
			return Scan{}, err
		}
		s.State[k] = sum
		if keepImages {
			s.Images[k], _ = ImageJSON(item)
		}
	}
	return s, nil
}

// Streams.

type memStreams struct{ w *world }

var _ Streams = memStreams{}

func (m memStreams) Records(_ context.Context, arn string) ([]StreamRecord, error) {
	m.w.pump() // the event source mapping polls in the background
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	var out []StreamRecord
	for _, r := range m.w.streams[arn] {
		out = append(out, r.StreamRecord)
	}
	return out, nil
}

// Subscriptions.

type memSubs struct{ w *world }

var _ Subscriptions = memSubs{}

func (m memSubs) Ensure(_ context.Context, arn string) (bool, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if m.w.subs[arn] > 0 {
		return false, nil
	}
	m.w.call("subscribe %s", arn)
	m.w.subs[arn]++
	return true, nil
}

func (m memSubs) Remove(_ context.Context, arn string) (int, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["remove"]; err != nil {
		return 0, err
	}
	n := m.w.subs[arn]
	if n > 0 {
		m.w.call("unsubscribe %s", arn)
	}
	delete(m.w.subs, arn)
	return n, nil
}

// Partitions.

type memArchive struct{ w *world }

var _ Partitions = memArchive{}

func (m memArchive) Read(_ context.Context, p Partition) (Contents, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["read"]; err != nil {
		return Contents{}, err
	}
	c := Contents{Sequences: map[string]bool{}}
	replay := NewReplay()
	for k, rows := range m.w.files {
		if !strings.HasPrefix(k, p.Prefix()) {
			continue
		}
		c.Files = append(c.Files, File{Key: k, Rows: int64(len(rows)), Bytes: int64(100 * len(rows))})
		c.Rows += int64(len(rows))
		for _, r := range rows {
			if err := replay.Add(r); err != nil {
				return Contents{}, err
			}
			c.Sequences[trimZeros(r.SequenceNumber)] = true
		}
	}
	c.State = replay.State()
	c.Manifest = m.w.manifests[p.Prefix()]
	return c, nil
}

func (m memArchive) Compact(_ context.Context, p Partition, pol CompactionPolicy, table string, v Verification) (Compaction, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["compact"]; err != nil {
		return Compaction{}, err
	}
	var files []File
	for k, rows := range m.w.files {
		if strings.HasPrefix(k, p.Prefix()) {
			files = append(files, File{Key: k, Rows: int64(len(rows)), Bytes: int64(100 * len(rows))})
		}
	}
	c := Compaction{FilesBefore: len(files)}
	live := map[string]File{}
	for _, f := range files {
		live[f.Key] = f
	}
	var replaced []string
	for _, mg := range PlanCompaction(p, files, pol) {
		var sets [][]Row
		for _, in := range mg.Inputs {
			sets = append(sets, m.w.files[in.Key])
			delete(live, in.Key)
			replaced = append(replaced, in.Key)
		}
		rows := MergeRows(sets...)
		m.w.files[mg.Output] = rows
		live[mg.Output] = File{Key: mg.Output, Rows: int64(len(rows)), Bytes: int64(100 * len(rows))}
	}
	var keep []File
	for _, f := range live {
		keep = append(keep, f)
	}
	c.Manifest = NewManifest(p, keep, replaced, v.At)
	c.Manifest.SourceTable, c.Manifest.Verification = table, &v
	mf := c.Manifest
	m.w.manifests[p.Prefix()] = &mf
	for _, k := range replaced {
		delete(m.w.files, k)
	}
	c.FilesAfter, c.Merged = len(keep), len(replaced)
	m.w.call("compact %s %d→%d", p.Prefix(), c.FilesBefore, c.FilesAfter)
	return c, nil
}

func (m memArchive) Write(_ context.Context, key string, rows []Row) (File, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["write"]; err != nil {
		return File{}, err
	}
	m.w.files[key] = rows
	return File{Key: key, Rows: int64(len(rows))}, nil
}

// Leases.

// memLeases keeps the leases as the conditional writes of the DynamoDB
// adapter do: a live lease of another run is never overwritten, a renewal
// or a release of a lease the run no longer holds changes nothing.
type memLeases struct{ w *world }

var _ Leases = memLeases{}

func (m memLeases) Take(_ context.Context, l Lease, now time.Time) (Lease, bool, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["take"]; err != nil {
		return Lease{}, false, err
	}
	cur, ok := m.w.leases[l.Table]
	if ok && cur.Run != l.Run && cur.Expires.After(now) {
		m.w.leaseCalls = append(m.w.leaseCalls, fmt.Sprintf("held %s %s by %s", l.Table, l.Run, cur.Run))
		return cur, false, nil
	}
	m.w.leaseCalls = append(m.w.leaseCalls, fmt.Sprintf("take %s %s", l.Table, l.Run))
	m.w.leases[l.Table] = l
	if ok && cur.Run != l.Run {
		return cur, true, nil
	}
	return Lease{}, true, nil
}

func (m memLeases) Renew(_ context.Context, l Lease) (Lease, bool, error) {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["renew"]; err != nil {
		return Lease{}, false, err
	}
	cur, ok := m.w.leases[l.Table]
	if !ok || cur.Run != l.Run {
		m.w.leaseCalls = append(m.w.leaseCalls, fmt.Sprintf("lost %s %s", l.Table, l.Run))
		return cur, false, nil
	}
	m.w.leaseCalls = append(m.w.leaseCalls, fmt.Sprintf("renew %s %s %s", l.Table, l.Run, l.Step))
	m.w.leases[l.Table] = l
	return Lease{}, true, nil
}

func (m memLeases) Release(_ context.Context, l Lease) error {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	if err := m.w.fail["release"]; err != nil {
		return err
	}
	if cur, ok := m.w.leases[l.Table]; ok && cur.Run == l.Run {
		m.w.leaseCalls = append(m.w.leaseCalls, fmt.Sprintf("release %s %s", l.Table, l.Run))
		delete(m.w.leases, l.Table)
	}
	return nil
}

// lease returns table's lease (zero when none).
func (w *world) lease(table string) Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leases[table]
}

// setLeaseClock moves the leases' time (the rotators' LeaseClock).
func (w *world) setLeaseClock(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.leaseAt = at
}

// rotator builds a rotator over the world with a pinned clock and no real
// sleeping (each pause pumps the world, as time passing would).
func (w *world) rotator(now time.Time) *Rotator {
	return &Rotator{
		Policy: RotationPolicy{Prefix: "app-votes", GraceDays: 2, DrainWait: time.Minute, DrainPoll: time.Second},
		Tables: memTables{w}, Streams: memStreams{w}, Subscriptions: memSubs{w}, Archive: memArchive{w}, Leases: memLeases{w},
		Now:   func() time.Time { return now },
		Sleep: func(ctx context.Context, d time.Duration) error { w.pump(); return ctx.Err() },
		LeaseClock: func() time.Time {
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.leaseAt.IsZero() {
				return w.leaseAt
			}
			return now
		},
	}
}
