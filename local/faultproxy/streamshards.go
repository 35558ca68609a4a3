package faultproxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// Stream shards as AWS has them. DynamoDB Local serves each table's stream
// as one open shard; on AWS a busy table's stream has one shard per
// partition, and shards split as the table grows. A proxy built
// WithStreamShards answers the three DynamoDB Streams reads itself
// (DescribeStream, GetShardIterator, GetRecords) from a copy of each
// stream's records that it pulls from the upstream ("the pump"), cut into
// virtual shards:
//
//   - each stream starts with Shards open shards;
//   - a record goes to a shard by a hash of its item's key, as DynamoDB routes
//     it by partition: all records of one item go to one shard, in order;
//   - a shard that has taken SplitAfter records closes (its
//     EndingSequenceNumber is its last record's) and two children open, each
//     taking the keys of one half of the parent's hash range; a reader that
//     reads children only after their parent sees every item's records in
//     order, as on AWS;
//   - when the upstream stream is disabled (its table deleted) and drained,
//     every shard closes.
//
// The layout is a function of the upstream's records alone (no clock, no
// randomness): a proxy restarted on the same DynamoDB Local presents the same
// shard ids with the same records, so consumers' per-shard checkpoints stay
// valid. Sequence numbers are the upstream's, unchanged. Other Streams calls
// (ListStreams) and every DynamoDB call pass through.
//
// The pump reads the upstream at most every pumpEvery per stream, however
// many shards and readers poll it, with the credentials of the request that
// triggered it (DynamoDB Local keeps one database per access key and region
// and does not verify signatures). Records are kept in memory for the life of
// the proxy; AWS keeps them 24 hours.

// StreamShards configures the stream shard emulation.
type StreamShards struct {
	// Shards is the number of shards each stream opens with (at least 1).
	Shards int
	// SplitAfter is the number of records after which a shard closes and
	// two children open; 0 never splits.
	SplitAfter int
	// MaxDepth bounds the splits: a shard MaxDepth splits below its root
	// never splits again (default 2: at most 4 × Shards shards open).
	MaxDepth int
}

// WithStreamShards makes a DynamoDB proxy serve each stream as s describes.
func WithStreamShards(s StreamShards) Option {
	return func(c *config) error {
		if s.Shards < 1 || s.Shards > 1024 {
			return fmt.Errorf("%w: stream shards %d: want 1 to 1024", ErrBadOption, s.Shards)
		}
		if s.SplitAfter < 0 {
			return fmt.Errorf("%w: stream shard SplitAfter %d is negative", ErrBadOption, s.SplitAfter)
		}
		if s.MaxDepth <= 0 {
			s.MaxDepth = 2
		}
		c.streamShards = &s
		return nil
	}
}

const (
	streamsTarget   = "DynamoDBStreams_20120810."
	pumpEvery       = 100 * time.Millisecond
	describeEvery   = 2 * time.Second
	maxShardsListed = 100
)

// shardEmulator holds every stream's virtual shards.
type shardEmulator struct {
	cfg  StreamShards
	call upstreamCaller

	mu      sync.Mutex
	streams map[string]*vstream
}

// upstreamCaller posts a JSON request to the upstream with the headers of h
// that carry credentials, returning the status and body.
type upstreamCaller func(ctx context.Context, h http.Header, target string, in any) (int, []byte, error)

type vshard struct {
	id, parent       string
	root, depth      int
	startSeq, endSeq string
	children         [2]*vshard
	path             string // the splits from the root: ".0.1"
	recs             []json.RawMessage
	seqs             []string
	closed           bool
}

type upShard struct {
	id, parent string
	iter       string
	lastSeq    string
	done       bool
}

type vstream struct {
	arn   string
	table string // the table arn is the stream of ("" when arn names none)

	pumpMu   sync.Mutex // one pump at a time
	pumpedAt time.Time
	written  atomic.Bool // the table was written since the last pump began
	descAt   time.Time

	mu       sync.Mutex
	desc     map[string]json.RawMessage // the upstream's description, without Shards
	roots    []*vshard
	order    []*vshard // creation order: parents before children
	byID     map[string]*vshard
	up       []*upShard
	disabled bool
	lastSeq  string
}

// upstreamFailure is an upstream answer other than 200, passed to the
// client as it came.
type upstreamFailure struct {
	status int
	body   []byte
}

func (f *upstreamFailure) Error() string {
	return fmt.Sprintf("faultproxy: upstream status %d: %s", f.status, f.body)
}

// serveStreams answers a DynamoDB Streams read from the virtual shards. It
// returns false for requests it leaves to the upstream.
func (p *Proxy) serveStreams(w http.ResponseWriter, r *http.Request, op Operation, body []byte) bool {
	if p.shards == nil || !strings.HasPrefix(r.Header.Get("X-Amz-Target"), streamsTarget) {
		return false
	}
	var out any
	var err error
	switch op.Action {
	case "DescribeStream":
		out, err = p.shards.describe(r.Context(), r.Header, body)
	case "GetShardIterator":
		out, err = p.shards.iterator(r.Context(), r.Header, body)
	case "GetRecords":
		out, err = p.shards.records(r.Context(), r.Header, body)
	default:
		return false
	}
	p.count(op.Action, func(c *Counts) { c.Forwarded++ })
	var uf *upstreamFailure
	var ae *awsError
	switch {
	case errors.As(err, &uf):
		h := w.Header()
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("Content-Length", strconv.Itoa(len(uf.body)))
		w.WriteHeader(uf.status)
		_, _ = w.Write(uf.body)
	case errors.As(err, &ae):
		p.writeError(w, r, *ae)
	case err != nil:
		if r.Context().Err() == nil {
			p.logger.Warn("faultproxy: stream shards", "action", op.Action, "err", err)
			p.writeError(w, r, p.serverError(http.StatusInternalServerError))
		}
	default:
		b, merr := json.Marshal(out)
		if merr != nil {
			p.writeError(w, r, p.serverError(http.StatusInternalServerError))
			return true
		}
		writeJSON(w, b)
	}
	return true
}

func writeJSON(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func streamsError(code, message string) error {
	return &awsError{status: http.StatusBadRequest, code: code, namespace: dynamoNamespace, sender: true, message: message}
}

// stream returns arn's state, creating it (with its root shards) on first use.
func (e *shardEmulator) stream(arn string) *vstream {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.streams[arn]; ok {
		return v
	}
	table, _, _ := ledger.StreamTable(arn)
	v := &vstream{arn: arn, table: table, byID: map[string]*vshard{}}
	for i := range e.cfg.Shards {
		s := &vshard{id: shardID(arn, i, ""), root: i}
		v.roots = append(v.roots, s)
		v.order = append(v.order, s)
		v.byID[s.id] = s
	}
	e.streams[arn] = v
	return v
}

// shardID is a shard's id: its root's index and its path of splits, and a
// hash of the stream, in the shape of AWS's shard ids.
func shardID(arn string, root int, path string) string {
	h := fnv.New32a()
	_, _ = io.WriteString(h, arn)
	return fmt.Sprintf("shardId-%05d%s-%08x", root, path, h.Sum32())
}

// pump brings the stream's copy up to date with the upstream, at most every
// pumpEvery. It describes the upstream stream at first, every
// describeEvery, and when every upstream shard it knows has ended (a new
// one may have opened).
func (e *shardEmulator) pump(ctx context.Context, h http.Header, v *vstream) error {
	v.pumpMu.Lock()
	defer v.pumpMu.Unlock()
	now := time.Now()
	if !v.written.Swap(false) && now.Sub(v.pumpedAt) < pumpEvery {
		return nil
	}
	v.mu.Lock()
	needDescribe := v.desc == nil || now.Sub(v.descAt) >= describeEvery || !v.disabled && countDone(v.up) == len(v.up)
	v.mu.Unlock()
	if needDescribe {
		if err := e.describeUpstream(ctx, h, v); err != nil {
			return err
		}
		v.descAt = now
	}
	for {
		u := v.nextUpstream()
		if u == nil {
			break
		}
		if err := e.readUpstream(ctx, h, v, u); err != nil {
			return err
		}
		if !u.done {
			break // read to its open end: nothing more for now
		}
	}
	v.mu.Lock()
	if v.disabled && countDone(v.up) == len(v.up) {
		for _, s := range v.order {
			if s.children[0] == nil && !s.closed {
				s.close(v.lastSeq)
			}
		}
	}
	v.mu.Unlock()
	v.pumpedAt = time.Now()
	return nil
}

func countDone(up []*upShard) int {
	n := 0
	for _, u := range up {
		if u.done {
			n++
		}
	}
	return n
}

// nextUpstream is the first upstream shard not read to its end whose parent
// was (parents first, as a reader must).
func (v *vstream) nextUpstream() *upShard {
	v.mu.Lock()
	defer v.mu.Unlock()
	done := map[string]bool{}
	known := map[string]bool{}
	for _, u := range v.up {
		known[u.id] = true
		if u.done {
			done[u.id] = true
		}
	}
	for _, u := range v.up {
		if !u.done && (u.parent == "" || !known[u.parent] || done[u.parent]) {
			return u
		}
	}
	return nil
}

// upstreamShard is a shard of the upstream's DescribeStream answer.
type upstreamShard struct {
	ShardId, ParentShardId string
	SequenceNumberRange    struct{ StartingSequenceNumber, EndingSequenceNumber string }
}

// describeUpstream lists the upstream's shards and keeps its description.
func (e *shardEmulator) describeUpstream(ctx context.Context, h http.Header, v *vstream) error {
	desc, shards, err := e.describePages(ctx, h, v)
	if err != nil || desc == nil {
		return err
	}
	var status string
	_ = json.Unmarshal(desc["StreamStatus"], &status)

	v.mu.Lock()
	defer v.mu.Unlock()
	v.desc = desc
	v.disabled = status == "DISABLED" || status == "DISABLING"
	known := map[string]bool{}
	for _, u := range v.up {
		known[u.id] = true
	}
	for _, s := range shards {
		if !known[s.ShardId] {
			v.up = append(v.up, &upShard{id: s.ShardId, parent: s.ParentShardId})
		}
		if len(v.roots) > 0 && v.roots[0].startSeq == "" && s.SequenceNumberRange.StartingSequenceNumber != "" {
			for _, r := range v.roots {
				r.startSeq = s.SequenceNumberRange.StartingSequenceNumber
			}
		}
	}
	return nil
}

// describePages reads every page of the upstream's DescribeStream: the
// description (without its shards) and the shards. When the table is gone
// after v was described, v is disabled instead, and the description is nil.
func (e *shardEmulator) describePages(ctx context.Context, h http.Header, v *vstream) (map[string]json.RawMessage, []upstreamShard, error) {
	var shards []upstreamShard
	var desc map[string]json.RawMessage
	var start string
	for {
		in := map[string]any{"StreamArn": v.arn}
		if start != "" {
			in["ExclusiveStartShardId"] = start
		}
		status, body, err := e.call(ctx, h, "DescribeStream", in)
		if err != nil {
			return nil, nil, err
		}
		if status != http.StatusOK {
			if bytes.Contains(body, []byte("ResourceNotFoundException")) && v.disable() {
				return nil, nil, nil
			}
			return nil, nil, &upstreamFailure{status: status, body: body}
		}
		var out struct{ StreamDescription map[string]json.RawMessage }
		if err := json.Unmarshal(body, &out); err != nil {
			return nil, nil, fmt.Errorf("faultproxy: DescribeStream answer: %w", err)
		}
		if desc == nil {
			desc = out.StreamDescription
		}
		var page []upstreamShard
		if raw, ok := out.StreamDescription["Shards"]; ok {
			if err := json.Unmarshal(raw, &page); err != nil {
				return nil, nil, fmt.Errorf("faultproxy: DescribeStream shards: %w", err)
			}
		}
		shards = append(shards, page...)
		var last string
		if raw, ok := out.StreamDescription["LastEvaluatedShardId"]; ok {
			_ = json.Unmarshal(raw, &last)
		}
		if last == "" {
			break
		}
		start = last
	}
	delete(desc, "Shards")
	delete(desc, "LastEvaluatedShardId")
	return desc, shards, nil
}

// disable marks a stream described before whose table is gone: what was
// read stays readable, and every shard closes once drained. It reports
// false for a stream never described (an unknown stream).
func (v *vstream) disable() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.desc == nil {
		return false
	}
	v.disabled = true
	for _, u := range v.up {
		u.done = true
	}
	v.desc["StreamStatus"] = json.RawMessage(`"DISABLED"`)
	return true
}

// readUpstream reads u from where it was left until it returns no records
// or ends, routing each record to its virtual shard.
func (e *shardEmulator) readUpstream(ctx context.Context, h http.Header, v *vstream, u *upShard) error {
	for range 100 { // at most 100,000 records a pump
		if u.iter == "" {
			in := map[string]any{"StreamArn": v.arn, "ShardId": u.id, "ShardIteratorType": "TRIM_HORIZON"}
			if u.lastSeq != "" {
				in["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER"
				in["SequenceNumber"] = u.lastSeq
			}
			status, body, err := e.call(ctx, h, "GetShardIterator", in)
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				if bytes.Contains(body, []byte("ResourceNotFoundException")) || bytes.Contains(body, []byte("TrimmedDataAccessException")) {
					u.done = true // the shard (or its table) is gone
					return nil
				}
				return &upstreamFailure{status: status, body: body}
			}
			var out struct{ ShardIterator string }
			if err := json.Unmarshal(body, &out); err != nil {
				return fmt.Errorf("faultproxy: GetShardIterator answer: %w", err)
			}
			u.iter = out.ShardIterator
			if u.iter == "" {
				u.done = true
				return nil
			}
		}
		status, body, err := e.call(ctx, h, "GetRecords", map[string]any{"ShardIterator": u.iter, "Limit": 1000})
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			switch {
			case bytes.Contains(body, []byte("ExpiredIteratorException")) || bytes.Contains(body, []byte("TrimmedDataAccessException")):
				// DynamoDB Local answers both for an iterator it no longer
				// holds: a new one from after the last record read.
				u.iter = ""
				continue
			case bytes.Contains(body, []byte("ResourceNotFoundException")):
				u.done = true
				return nil
			}
			return &upstreamFailure{status: status, body: body}
		}
		var out struct {
			Records           []json.RawMessage
			NextShardIterator *string
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("faultproxy: GetRecords answer: %w", err)
		}
		if err := e.route(v, u, out.Records); err != nil {
			return err
		}
		if out.NextShardIterator == nil || *out.NextShardIterator == "" {
			u.done = true
			return nil
		}
		u.iter = *out.NextShardIterator
		if len(out.Records) == 0 {
			return nil
		}
	}
	return nil
}

// route appends records to the open shard their key hashes to, splitting
// shards that are full.
func (e *shardEmulator) route(v *vstream, u *upShard, recs []json.RawMessage) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, raw := range recs {
		var rec struct {
			Dynamodb struct {
				Keys           map[string]any
				SequenceNumber string
			} `json:"dynamodb"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("faultproxy: stream record: %w", err)
		}
		seq := rec.Dynamodb.SequenceNumber
		key, err := json.Marshal(rec.Dynamodb.Keys) // map keys sorted: canonical
		if err != nil {
			return fmt.Errorf("faultproxy: stream record keys: %w", err)
		}
		hash := keyHash(key)
		s := v.roots[hash%uint64(len(v.roots))]
		bits := hash / uint64(len(v.roots))
		for s.children[0] != nil {
			s = s.children[bits&1]
			bits >>= 1
		}
		if s.startSeq == "" {
			s.startSeq = seq
		}
		s.recs = append(s.recs, raw)
		s.seqs = append(s.seqs, seq)
		u.lastSeq, v.lastSeq = seq, seq
		if e.cfg.SplitAfter > 0 && len(s.recs) >= e.cfg.SplitAfter && s.depth < e.cfg.MaxDepth {
			v.split(s)
		}
	}
	return nil
}

func keyHash(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	// fnv's low bits mix poorly for short keys: fold the high half in.
	x := h.Sum64()
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 32
	return x
}

// split closes s at its last record and opens its two children.
func (v *vstream) split(s *vshard) {
	s.close(s.seqs[len(s.seqs)-1])
	next := seqAfter(s.endSeq)
	for b := range 2 {
		path := s.path + "." + strconv.Itoa(b)
		c := &vshard{
			id: shardID(v.arn, s.root, path), path: path,
			parent: s.id, root: s.root, depth: s.depth + 1, startSeq: next,
		}
		s.children[b] = c
		v.order = append(v.order, c)
		v.byID[c.id] = c
	}
}

func (s *vshard) close(last string) {
	s.closed = true
	s.endSeq = last
	if s.endSeq == "" {
		s.endSeq = s.startSeq
	}
}

// seqAfter is the sequence number one past seq (decimal, kept at its width).
func seqAfter(seq string) string {
	n, ok := new(big.Int).SetString(seq, 10)
	if !ok {
		return seq
	}
	s := n.Add(n, big.NewInt(1)).String()
	if len(s) < len(seq) {
		s = strings.Repeat("0", len(seq)-len(s)) + s
	}
	return s
}

type shardDesc struct {
	ShardId             string
	ParentShardId       string `json:",omitempty"`
	SequenceNumberRange seqRange
}

type seqRange struct {
	StartingSequenceNumber string `json:",omitempty"`
	EndingSequenceNumber   string `json:",omitempty"`
}

// describe answers DescribeStream: the upstream's description with the
// virtual shards, parents before children, a page at a time.
func (e *shardEmulator) describe(ctx context.Context, h http.Header, body []byte) (any, error) {
	var in struct {
		StreamArn             string
		Limit                 int
		ExclusiveStartShardId string
	}
	if err := json.Unmarshal(body, &in); err != nil || in.StreamArn == "" {
		return nil, streamsError("ValidationException", "DescribeStream needs a StreamArn")
	}
	if in.Limit <= 0 || in.Limit > maxShardsListed {
		in.Limit = maxShardsListed
	}
	v, err := e.pumped(ctx, h, in.StreamArn)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	desc := map[string]any{}
	for k, raw := range v.desc {
		desc[k] = raw
	}
	shards := []shardDesc{}
	started := in.ExclusiveStartShardId == ""
	var last string
	for _, s := range v.order {
		if !started {
			started = s.id == in.ExclusiveStartShardId
			continue
		}
		if len(shards) == in.Limit {
			last = shards[len(shards)-1].ShardId
			break
		}
		d := shardDesc{ShardId: s.id, ParentShardId: s.parent, SequenceNumberRange: seqRange{StartingSequenceNumber: s.startSeq}}
		if s.closed {
			d.SequenceNumberRange.EndingSequenceNumber = s.endSeq
		}
		shards = append(shards, d)
	}
	desc["Shards"] = shards
	if last != "" {
		desc["LastEvaluatedShardId"] = last
	}
	return map[string]any{"StreamDescription": desc}, nil
}

// written tells the emulator that tables were written: their streams'
// next read pumps the upstream however recently it was pumped, so the
// first read after a write sees it (a reader woken by the write reads at
// once, within pumpEvery of the last pump).
func (e *shardEmulator) written(tables []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range e.streams {
		if v.table != "" && slices.Contains(tables, v.table) {
			v.written.Store(true)
		}
	}
}

// pumped is arn's stream brought up to date with the upstream (the stream
// is created on first use, or again after the proxy restarted).
func (e *shardEmulator) pumped(ctx context.Context, h http.Header, arn string) (*vstream, error) {
	v := e.stream(arn)
	if err := e.pump(ctx, h, v); err != nil {
		e.forgetIfEmpty(v)
		return nil, err
	}
	return v, nil
}

// shard is a shard of v, with v locked; the caller unlocks v.mu.
func (v *vstream) shard(id string) (*vshard, error) {
	v.mu.Lock()
	s, ok := v.byID[id]
	if !ok {
		return nil, streamsError("ResourceNotFoundException", "Requested resource not found: Shard does not exist")
	}
	return s, nil
}

// forgetIfEmpty drops a stream the upstream never described (a wrong ARN),
// so it holds no memory.
func (e *shardEmulator) forgetIfEmpty(v *vstream) {
	v.mu.Lock()
	empty := v.desc == nil
	v.mu.Unlock()
	if empty {
		e.mu.Lock()
		if e.streams[v.arn] == v {
			delete(e.streams, v.arn)
		}
		e.mu.Unlock()
	}
}

// shardIterator is the opaque iterator the proxy hands out.
type shardIterator struct {
	Stream string `json:"a"`
	Shard  string `json:"s"`
	Index  int    `json:"i"`
}

func (it shardIterator) encode() string {
	b, _ := json.Marshal(it) // strings and an int
	return "vshard:" + base64.RawURLEncoding.EncodeToString(b)
}

func decodeIterator(s string) (shardIterator, bool) {
	var it shardIterator
	raw, ok := strings.CutPrefix(s, "vshard:")
	if !ok {
		return it, false
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || json.Unmarshal(b, &it) != nil || it.Stream == "" || it.Shard == "" || it.Index < 0 {
		return it, false
	}
	return it, true
}

// iterator answers GetShardIterator.
func (e *shardEmulator) iterator(ctx context.Context, h http.Header, body []byte) (any, error) {
	var in struct {
		StreamArn, ShardId, ShardIteratorType, SequenceNumber string
	}
	if err := json.Unmarshal(body, &in); err != nil || in.StreamArn == "" || in.ShardId == "" {
		return nil, streamsError("ValidationException", "GetShardIterator needs a StreamArn and a ShardId")
	}
	v, err := e.pumped(ctx, h, in.StreamArn)
	if err != nil {
		return nil, err
	}
	s, err := v.shard(in.ShardId)
	defer v.mu.Unlock()
	if err != nil {
		return nil, err
	}
	it := shardIterator{Stream: in.StreamArn, Shard: s.id}
	switch in.ShardIteratorType {
	case "TRIM_HORIZON":
	case "LATEST":
		it.Index = len(s.recs)
	case "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER":
		if in.SequenceNumber == "" {
			return nil, streamsError("ValidationException", in.ShardIteratorType+" needs a SequenceNumber")
		}
		it.Index = len(s.seqs)
		for i, seq := range s.seqs {
			if !ledger.SeqLess(seq, in.SequenceNumber) && (in.ShardIteratorType == "AT_SEQUENCE_NUMBER" || seq != in.SequenceNumber) {
				it.Index = i
				break
			}
		}
	default:
		return nil, streamsError("ValidationException", fmt.Sprintf("ShardIteratorType %q is not TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER", in.ShardIteratorType))
	}
	return map[string]string{"ShardIterator": it.encode()}, nil
}

// records answers GetRecords: up to Limit (at most 1,000) records from the
// iterator's place; no NextShardIterator once a closed shard is read to its
// end.
func (e *shardEmulator) records(ctx context.Context, h http.Header, body []byte) (any, error) {
	var in struct {
		ShardIterator string
		Limit         int
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, streamsError("ValidationException", "GetRecords needs a ShardIterator")
	}
	it, ok := decodeIterator(in.ShardIterator)
	if !ok {
		return nil, streamsError("ValidationException", "Invalid ShardIterator")
	}
	if in.Limit <= 0 || in.Limit > 1000 {
		in.Limit = 1000
	}
	// After a restart of the proxy the layout is rebuilt from the upstream.
	v, err := e.pumped(ctx, h, it.Stream)
	if err != nil {
		return nil, err
	}
	s, err := v.shard(it.Shard)
	defer v.mu.Unlock()
	if err != nil {
		return nil, err
	}
	from := min(it.Index, len(s.recs))
	to := min(from+in.Limit, len(s.recs))
	out := map[string]any{"Records": s.recs[from:to]}
	if !(s.closed && to == len(s.recs)) {
		out["NextShardIterator"] = shardIterator{Stream: it.Stream, Shard: s.id, Index: to}.encode()
	}
	return out, nil
}

// callUpstream posts a Streams request to the upstream with the client's
// credentials headers.
func (p *Proxy) callUpstream(ctx context.Context, h http.Header, action string, in any) (int, []byte, error) {
	return p.callTarget(ctx, h, streamsTarget+action, in)
}

// callTarget sends one JSON request to the upstream (target is the
// X-Amz-Target, such as "DynamoDB_20120810.DescribeTable") with the
// client's credentials, and returns the status and body of its answer.
func (p *Proxy) callTarget(ctx context.Context, h http.Header, target string, in any) (int, []byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, nil, fmt.Errorf("faultproxy: encode %s: %w", target, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.upstream.String()+"/", bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("faultproxy: build %s: %w", target, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", target)
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := h.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		return 0, nil, fmt.Errorf("faultproxy: upstream %s: %w", target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("faultproxy: upstream %s: %w", target, err)
	}
	return resp.StatusCode, b, nil
}

// Error lets an awsError travel as an error to the one place that writes it.
func (e *awsError) Error() string { return e.code + ": " + e.message }
