package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// StreamsAPI is what the stream poller needs; *dynamodbstreams.Client satisfies it.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ StreamsAPI = (*dynamodbstreams.Client)(nil)

// StreamMapping is a DynamoDB Streams event source mapping.
type StreamMapping struct {
	ID        string
	Function  string
	StreamARN string
	// StartingPosition is TRIM_HORIZON or LATEST (LATEST applies to the
	// shards open when the mapping starts; later shards are read from their start).
	StartingPosition string
	BatchSize        int           // 1–10,000, default 100
	Window           time.Duration // MaximumBatchingWindowInSeconds
	// ReportBatchItemFailures: the handler returns events.DynamoDBEventResponse
	// naming the sequence number to resume from.
	ReportBatchItemFailures bool
	// Bisect (BisectBatchOnFunctionError) splits a failing batch in two and
	// retries each half, to isolate a poison record.
	Bisect bool
	// MaxRetryAttempts: -1 retries until the record expires (AWS default).
	MaxRetryAttempts int
	// MaxRecordAge: 0 or less means no limit.
	MaxRecordAge time.Duration
	// OnFailureQueueURL receives a description of each discarded batch.
	OnFailureQueueURL string
	// PollInterval between empty reads (default 250 ms locally; AWS polls each shard 4 times a second).
	PollInterval time.Duration
	// IdlePollInterval between empty reads of a shard that has returned
	// nothing for idleReads reads in a row: the local stack's saving (an
	// idle stack's reads were two thirds of its CPU time and of DynamoDB
	// Local's). A write the runner is told of (Wake) ends the wait; one it
	// is not told of waits up to this much longer. Default the runner's
	// (WithIdlePollInterval, 1 s) when PollInterval is left to its
	// default, else PollInterval (no slowing down).
	IdlePollInterval time.Duration
	// RetryBackoff is the first pause before retrying a failed batch (default
	// 100 ms; it doubles to 2 s, jittered as retry.Backoff does).
	RetryBackoff time.Duration
	// Filter is the mapping's FilterCriteria: records it drops are not
	// delivered and count as processed (the zero Filter delivers all).
	Filter Filter
	// TumblingWindow (TumblingWindowInSeconds) delivers the batches as
	// Lambda does in tumbling windows: events.DynamoDBTimeWindowEvent, with
	// the shard id, the window the batch falls in and the state the
	// function returned for that window, carried from one invocation of a
	// window to the next (a new window starts with an empty state). When a
	// window has ended, the shard's next poll or batch first makes its final
	// invocation: no records, isFinalInvokeForWindow, the window's last state.
	TumblingWindow time.Duration
	// Parallelization (ParallelizationFactor, 1–10; 0 is 1) is how many
	// batches of one shard are processed at once. At 1 a shard's next batch
	// is read after the function returned, as before. Above 1 the shard's
	// records are dealt by item key (partition and sort key) to that many
	// lanes, each batched and retried on its own, as Lambda keeps the
	// order per item: a key's records stay in order and are never in two
	// batches at once (see lanes.go). Not with TumblingWindow here: the
	// runner keeps one window state per shard.
	Parallelization int
}

// AddStream starts reading a stream for a function (now, or when the runner
// starts). The stream ends (and the mapping with it) when its table is deleted.
func (r *Runner) AddStream(streams StreamsAPI, queue SQSAPI, m StreamMapping) (string, error) {
	if _, err := r.Function(m.Function); err != nil {
		return "", err
	}
	if m.StreamARN == "" {
		return "", fmt.Errorf("runner: stream mapping for %s has no stream ARN", m.Function)
	}
	switch m.StartingPosition {
	case "":
		m.StartingPosition = string(streamtypes.ShardIteratorTypeTrimHorizon)
	case string(streamtypes.ShardIteratorTypeTrimHorizon), string(streamtypes.ShardIteratorTypeLatest):
	default:
		return "", fmt.Errorf("runner: StartingPosition %q must be TRIM_HORIZON or LATEST", m.StartingPosition)
	}
	if m.BatchSize <= 0 {
		m.BatchSize = 100
	}
	if m.BatchSize > 10000 {
		return "", fmt.Errorf("runner: stream BatchSize %d is above 10000", m.BatchSize)
	}
	if m.PollInterval <= 0 {
		m.PollInterval = 250 * time.Millisecond
		if m.IdlePollInterval <= 0 {
			m.IdlePollInterval = r.idlePoll
		}
	}
	m.IdlePollInterval = max(m.IdlePollInterval, m.PollInterval)
	if m.RetryBackoff <= 0 {
		m.RetryBackoff = 100 * time.Millisecond
	}
	if m.Parallelization == 0 {
		m.Parallelization = 1
	}
	if m.Parallelization < 1 || m.Parallelization > 10 {
		return "", fmt.Errorf("runner: ParallelizationFactor %d is outside 1–10", m.Parallelization)
	}
	if m.Parallelization > 1 && m.TumblingWindow > 0 {
		return "", fmt.Errorf("runner: %s: ParallelizationFactor %d with TumblingWindowInSeconds is not emulated locally (one window state per shard)", m.Function, m.Parallelization)
	}
	if m.ID == "" {
		m.ID = newID()
	}
	p := r.newStreamPoller(streams, queue, m)
	r.add(&source{id: m.ID, kind: "stream", desc: m.StreamARN + " → " + m.Function, start: p.run})
	return m.ID, nil
}

// newStreamPoller is the poller of mapping m, its defaults set.
func (r *Runner) newStreamPoller(streams StreamsAPI, queue SQSAPI, m StreamMapping) *streamPoller {
	table, _, _ := ledger.StreamTable(m.StreamARN) // "" when the ARN names none: Wake never reaches its readers
	return &streamPoller{r: r, c: streams, q: queue, m: m, done: map[string]bool{}, started: map[string]bool{}, ended: make(chan struct{}, 1),
		bell:     r.bell(table),
		newImage: m.Filter.Reads("dynamodb", "NewImage"), oldImage: m.Filter.Reads("dynamodb", "OldImage")}
}

type streamPoller struct {
	r *Runner
	c StreamsAPI
	q SQSAPI
	m StreamMapping

	mu      sync.Mutex
	done    map[string]bool // shards read to their end
	started map[string]bool
	ended   chan struct{} // a shard was read to its end: list the shards again now
	bell    *bell         // rung when the stream's table is written (Runner.Wake)
	// Whether the filter reads the records' images: passes leaves out
	// those it does not.
	newImage, oldImage bool

	windowMu sync.Mutex
	windows  map[string]windowState // per shard: tumbling windows' state
}

// run discovers shards and reads each one, parents before children.
func (p *streamPoller) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	initial := true
	for ctx.Err() == nil {
		shards, disabled, err := p.shards(ctx)
		if err != nil {
			var nf *streamtypes.ResourceNotFoundException
			if errors.As(err, &nf) {
				p.r.log.Info("stream is gone; mapping stops", "stream", p.m.StreamARN)
				return
			}
			if ctx.Err() == nil {
				p.r.log.Warn("describe stream failed", "stream", p.m.StreamARN, "err", err)
			}
		}
		if disabled && p.drained(shards) {
			// The table was deleted (or its stream turned off) and every
			// record was delivered: nothing more can come.
			wg.Wait()
			p.r.log.Info("stream disabled and drained; mapping stops", "stream", p.m.StreamARN)
			return
		}
		known := map[string]bool{}
		for _, s := range shards {
			known[aws.ToString(s.ShardId)] = true
		}
		for _, s := range shards {
			id := aws.ToString(s.ShardId)
			parent := aws.ToString(s.ParentShardId)
			p.mu.Lock()
			ready := !p.started[id] && (parent == "" || !known[parent] || p.done[parent])
			if ready {
				p.started[id] = true
			}
			p.mu.Unlock()
			if !ready {
				continue
			}
			pos := streamtypes.ShardIteratorTypeTrimHorizon
			if initial && p.m.StartingPosition == string(streamtypes.ShardIteratorTypeLatest) && s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber == nil {
				pos = streamtypes.ShardIteratorTypeLatest
			}
			wg.Add(1)
			go func(id string, pos streamtypes.ShardIteratorType) {
				defer wg.Done()
				p.readShard(ctx, id, pos)
			}(id, pos)
		}
		initial = false
		p.waitToList(ctx)
	}
}

// listEvery is how often a mapping lists its stream's shards when none
// has ended: new shards appear when one ends (its children) or when the
// stream is turned off, which a list this often sees in time.
const listEvery = 5 * time.Second

// waitToList waits until the next listing of the shards is due: listEvery,
// or as soon as a shard was read to its end, whose children may be read now.
func (p *streamPoller) waitToList(ctx context.Context) {
	p.r.sleepUntil(ctx, max(p.m.PollInterval, listEvery), p.ended)
}

// shards lists the stream's shards; disabled is true once the stream was
// turned off (its table deleted or its stream disabled): no shard grows again.
func (p *streamPoller) shards(ctx context.Context) (all []streamtypes.Shard, disabled bool, err error) {
	var start *string
	for {
		out, err := p.c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.m.StreamARN), ExclusiveStartShardId: start})
		if err != nil {
			return all, false, err
		}
		if out.StreamDescription == nil {
			return all, false, nil
		}
		disabled = out.StreamDescription.StreamStatus == streamtypes.StreamStatusDisabled ||
			out.StreamDescription.StreamStatus == streamtypes.StreamStatusDisabling
		all = append(all, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return all, disabled, nil
		}
	}
}

// drained reports whether every listed shard was read to its end.
func (p *streamPoller) drained(shards []streamtypes.Shard) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range shards {
		if !p.done[aws.ToString(s.ShardId)] {
			return false
		}
	}
	return true
}

// idleReads is how many empty reads in a row (2 s at 4 a second) make a
// shard idle: it is then read every IdlePollInterval until a record comes.
const idleReads = 8

// readShard reads one shard in order, in batches, until it ends. Above
// ParallelizationFactor 1 it deals the records to the shard's lanes, which
// batch and deliver them.
func (p *streamPoller) readShard(ctx context.Context, shard string, pos streamtypes.ShardIteratorType) {
	log := p.r.log.With("stream", p.m.StreamARN, "shard", shard)
	iter, err := p.iterator(ctx, shard, pos, "")
	if err != nil {
		log.Warn("get shard iterator failed", "err", err)
		p.mu.Lock()
		p.started[shard] = false // try again on the next listing
		p.mu.Unlock()
		return
	}
	var lanes *shardLanes // above ParallelizationFactor 1: the batches are the lanes'
	if p.m.Parallelization > 1 {
		lanes = p.startLanes(ctx, shard)
		defer lanes.finish()
	}
	batches := batcher{p: p, shard: shard}
	last := "" // the sequence number of the last record read, delivered or filtered out
	empty := 0 // reads in a row that returned no record
	for ctx.Err() == nil {
		written := p.bell.wait() // a write from now on ends the idle wait after this read
		var out *dynamodbstreams.GetRecordsOutput
		if iter != nil {
			out, err = p.c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(min(1000, p.m.BatchSize)))})
			if err != nil {
				var expired *streamtypes.ExpiredIteratorException
				var trimmed *streamtypes.TrimmedDataAccessException
				var gone *streamtypes.ResourceNotFoundException
				switch {
				case errors.As(err, &gone):
					return
				case errors.As(err, &expired) || errors.As(err, &trimmed):
					if iter, err = p.iterator(ctx, shard, streamtypes.ShardIteratorTypeAfterSequenceNumber, last); err != nil {
						log.Warn("renew shard iterator failed", "err", err)
						_ = p.r.clock.Sleep(ctx, time.Second)
					}
					continue
				}
				if ctx.Err() == nil {
					log.Warn("get records failed", "err", err)
				}
				_ = p.r.clock.Sleep(ctx, time.Second)
				continue
			}
			if n := len(out.Records); n > 0 {
				last = aws.ToString(out.Records[n-1].Dynamodb.SequenceNumber)
				empty = 0
			}
			kept := p.filter(out.Records)
			if lanes != nil {
				if !lanes.deal(ctx, kept) {
					return // the runner stopped
				}
				kept = nil // dealt
			}
			batches.add(kept)
			iter = out.NextShardIterator
		}
		closed := iter == nil
		if !batches.deliver(ctx, closed) {
			return
		}
		if closed {
			if lanes != nil {
				// The shard is done when every lane delivered its last
				// batch: only then may its children be read.
				lanes.finish()
				if ctx.Err() != nil {
					return
				}
			}
			p.mu.Lock()
			p.done[shard] = true
			p.mu.Unlock()
			select {
			case p.ended <- struct{}{}:
			default: // a listing is already due
			}
			return
		}
		if out != nil && len(out.Records) == 0 {
			if p.m.TumblingWindow > 0 {
				p.closeWindow(context.WithoutCancel(ctx), shard, p.r.clock.Now().UTC())
			}
			empty++
			if empty > idleReads {
				p.r.count(p.m.Function, func(s *Stats) { s.IdleShards++ })
				p.r.sleepUntil(ctx, p.m.IdlePollInterval, written)
				p.r.count(p.m.Function, func(s *Stats) { s.IdleShards-- })
			} else {
				_ = p.r.clock.Sleep(ctx, p.m.PollInterval)
			}
		}
	}
}

func (p *streamPoller) iterator(ctx context.Context, shard string, pos streamtypes.ShardIteratorType, seq string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.m.StreamARN), ShardId: aws.String(shard), ShardIteratorType: pos}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	} else if pos == streamtypes.ShardIteratorTypeAfterSequenceNumber {
		in.ShardIteratorType = streamtypes.ShardIteratorTypeTrimHorizon
	}
	out, err := p.c.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// streamRecord is a record read from the stream with its JSON as the
// function receives it, made once for the filter and every delivery.
type streamRecord struct {
	streamtypes.Record
	lambda []byte
	err    error // the record could not be converted: its batch fails
}

// filter keeps the records the mapping's filter passes, and converts
// them. A record that cannot be read for matching is kept: the function
// sees it and reports it, as it would without a filter.
func (p *streamPoller) filter(records []streamtypes.Record) []streamRecord {
	kept := make([]streamRecord, 0, len(records))
	for _, rec := range records {
		if !p.m.Filter.Empty() {
			ok, err := p.passes(rec)
			if err != nil {
				p.r.log.Warn("stream record not filtered; it is delivered", "function", p.m.Function, "err", err)
			} else if !ok {
				continue
			}
		}
		sr := streamRecord{Record: rec}
		lr, err := ddbstream.LambdaRecord(rec, p.m.StreamARN, p.r.region)
		if err == nil {
			sr.lambda, err = json.Marshal(lr)
		}
		if err != nil {
			sr.err = fmt.Errorf("runner: convert stream record: %w", err)
		}
		kept = append(kept, sr)
	}
	if n := len(records) - len(kept); n > 0 {
		p.r.count(p.m.Function, func(s *Stats) { s.Filtered += n })
	}
	return kept
}

// passes matches a record against the mapping's filter, without the
// images no pattern reads: most of a record's bytes, which a filter on
// its keys would otherwise convert, encode and parse for every record
// it drops (a third of the local stack's CPU time while the objects
// indexer drained a backlog).
func (p *streamPoller) passes(rec streamtypes.Record) (bool, error) {
	if d := rec.Dynamodb; d != nil {
		probe := *d
		if !p.newImage {
			probe.NewImage = nil
		}
		if !p.oldImage {
			probe.OldImage = nil
		}
		rec.Dynamodb = &probe
	}
	lr, err := ddbstream.LambdaRecord(rec, p.m.StreamARN, p.r.region)
	if err != nil {
		return false, err
	}
	b, err := json.Marshal(lr)
	if err != nil {
		return false, err
	}
	return p.m.Filter.Match(b)
}

// batcher gathers the records of a shard (or of one of its lanes) into
// batches: BatchSize records, or fewer once the batching window (Window)
// has passed since the first of them came.
type batcher struct {
	p       *streamPoller
	shard   string
	buf     []streamRecord
	firstAt time.Time // when the first record of buf came
}

func (b *batcher) add(records []streamRecord) {
	if len(b.buf) == 0 && len(records) > 0 {
		b.firstAt = time.Now()
	}
	b.buf = append(b.buf, records...)
}

// due is how long until the batching window of what buf holds closes.
func (b *batcher) due() time.Duration { return b.p.m.Window - time.Since(b.firstAt) }

// deliver processes the batches that are due, every record held when
// last, one after another; false when the runner stopped. An invocation
// that started finishes even when the runner stops; its retries do not
// start.
func (b *batcher) deliver(ctx context.Context, last bool) bool {
	for len(b.buf) >= b.p.m.BatchSize || len(b.buf) > 0 && (last || b.due() <= 0) {
		n := min(len(b.buf), b.p.m.BatchSize)
		b.p.process(context.WithoutCancel(ctx), ctx, b.shard, b.buf[:n])
		b.buf = b.buf[n:]
		b.firstAt = time.Now()
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// pending is a batch waiting for (re)delivery with its retry count.
type pending struct {
	records  []streamRecord
	attempts int
}

// process delivers one batch with Lambda's stream retry rules: a partial
// failure resumes at the reported sequence number (a split, not a retry,
// when it made progress and the mapping bisects), a function error retries
// (bisecting first when asked), and a batch that runs out of retries or age
// goes to the on-failure destination so the shard moves on. ctx is the
// invocations' (they finish when the runner stops); once running ends, no
// invocation or retry starts.
func (p *streamPoller) process(ctx, running context.Context, shard string, records []streamRecord) {
	queue := []pending{{records: records}}
	for len(queue) > 0 && running.Err() == nil {
		b := queue[0]
		queue = queue[1:]
		resume, err := p.invoke(ctx, shard, b.records)
		if err == nil && resume < 0 {
			continue
		}
		if err == nil && resume > 0 && p.m.Bisect {
			// A partial failure past the batch's first record, with
			// bisection on: Lambda splits the batch at the returned
			// sequence number, and the rest starts afresh as a half does.
			rest := pending{records: b.records[resume:]}
			if p.tooOld(rest) {
				p.discard(ctx, shard, rest, "RecordAgeExceeded")
				continue
			}
			queue = append([]pending{rest}, queue...)
			continue
		}
		if err == nil {
			b.records = b.records[resume:] // partial failure: resume at the failed record
		}
		if err != nil && p.m.Bisect && len(b.records) > 1 {
			// A split is not a retry: each half starts afresh, so a poison
			// record ends alone and only it is discarded.
			if p.tooOld(b) {
				p.discard(ctx, shard, b, "RecordAgeExceeded")
				continue
			}
			half := len(b.records) / 2
			queue = append([]pending{{records: b.records[:half]}, {records: b.records[half:]}}, queue...)
			continue
		}
		b.attempts++
		if p.m.MaxRetryAttempts >= 0 && b.attempts > p.m.MaxRetryAttempts {
			p.discard(ctx, shard, b, "RetryAttemptsExhausted")
			continue
		}
		if p.tooOld(b) {
			p.discard(ctx, shard, b, "RecordAgeExceeded")
			continue
		}
		backoff := retry.Backoff{Base: p.m.RetryBackoff, Max: 2 * time.Second}
		if p.r.clock.Sleep(running, backoff.Delay(b.attempts)) != nil {
			return // the runner stopped: the batch is not retried
		}
		queue = append([]pending{b}, queue...)
	}
}

// tooOld reports whether the batch's first record is past MaxRecordAge.
func (p *streamPoller) tooOld(b pending) bool {
	if p.m.MaxRecordAge <= 0 || len(b.records) == 0 {
		return false
	}
	t := b.records[0].Dynamodb.ApproximateCreationDateTime
	return t != nil && p.r.clock.Now().Sub(*t) > p.m.MaxRecordAge
}

// invoke delivers records. It returns resume = -1 on success, the index to
// resume from on a partial failure, or an error for a failed invocation.
func (p *streamPoller) invoke(ctx context.Context, shard string, records []streamRecord) (resume int, err error) {
	fn := p.m.Function
	for _, rec := range records {
		if rec.err != nil {
			return 0, rec.err
		}
	}
	sent := records
	crash, cut := p.r.crash(fn)
	if crash {
		sent = records[:int(cut*float64(len(records)))]
	}
	var payload []byte
	var window events.Window
	if p.m.TumblingWindow > 0 {
		now := p.r.clock.Now().UTC()
		p.closeWindow(ctx, shard, now) // the shard's previous window, if it ended
		start := now.Truncate(p.m.TumblingWindow)
		window = events.Window{Start: events.RFC3339EpochTime{Time: start}, End: events.RFC3339EpochTime{Time: start.Add(p.m.TumblingWindow)}}
		state := p.windowState(shard, window)
		// events.DynamoDBTimeWindowEvent's JSON, with the records as made.
		payload, err = json.Marshal(struct {
			Records []json.RawMessage `json:"Records"`
			events.TimeWindowProperties
		}{rawRecords(sent), events.TimeWindowProperties{Window: window, State: state, ShardID: shard, EventSourceARN: p.m.StreamARN}})
		if err != nil {
			return 0, fmt.Errorf("runner: marshal stream event: %w", err)
		}
	} else {
		payload = eventJSON(sent)
	}
	p.r.count(fn, func(s *Stats) { s.Records += len(sent) })
	out, err := p.r.Invoke(ctx, fn, payload)
	if crash {
		p.r.count(fn, func(s *Stats) { s.Crashes++ })
		return 0, errors.New("runner: injected crash mid-batch")
	}
	if err != nil {
		return 0, err
	}
	if dup, _ := p.r.chance(fn, func(f Faults) float64 { return f.DuplicateRate }); dup {
		p.r.count(fn, func(s *Stats) { s.Duplicates++ })
		if _, err := p.r.Invoke(ctx, fn, payload); err != nil {
			return 0, err
		}
	}
	if !p.m.ReportBatchItemFailures || len(out) == 0 || string(out) == "null" {
		return -1, nil
	}
	var resp events.DynamoDBTimeWindowEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return 0, fmt.Errorf("runner: batch response does not parse: %w", err)
	}
	if p.m.TumblingWindow > 0 {
		p.keepWindowState(shard, window, resp.State)
	}
	if len(resp.BatchItemFailures) == 0 {
		return -1, nil
	}
	// Resume at the lowest reported sequence number; one that is not in the
	// batch (or empty) fails the whole batch, as in AWS.
	idx := map[string]int{}
	for i, rec := range records {
		idx[aws.ToString(rec.Dynamodb.SequenceNumber)] = i
	}
	lowest := len(records)
	for _, f := range resp.BatchItemFailures {
		i, ok := idx[f.ItemIdentifier]
		if !ok {
			return 0, fmt.Errorf("runner: batch item failure %q is not a sequence number of the batch", f.ItemIdentifier)
		}
		lowest = min(lowest, i)
	}
	return lowest, nil
}

// rawRecords are the records' JSON.
func rawRecords(records []streamRecord) []json.RawMessage {
	out := make([]json.RawMessage, len(records))
	for i, rec := range records {
		out[i] = rec.lambda
	}
	return out
}

// eventJSON is events.DynamoDBEvent's JSON of the records, joined from
// each record's: {"Records":[...]}.
func eventJSON(records []streamRecord) []byte {
	n := len(`{"Records":[]}`) + len(records)
	for _, rec := range records {
		n += len(rec.lambda)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"Records":[`...)
	for i, rec := range records {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, rec.lambda...)
	}
	return append(b, "]}"...)
}

// windowState is the state the function returned last in the shard's
// current window (nil in a new window).
func (p *streamPoller) windowState(shard string, w events.Window) map[string]string {
	p.windowMu.Lock()
	defer p.windowMu.Unlock()
	if ws, ok := p.windows[shard]; ok && ws.window.Start.Equal(w.Start.Time) {
		return ws.state
	}
	return nil
}

func (p *streamPoller) keepWindowState(shard string, w events.Window, state map[string]string) {
	p.windowMu.Lock()
	defer p.windowMu.Unlock()
	if p.windows == nil {
		p.windows = map[string]windowState{}
	}
	p.windows[shard] = windowState{window: w, state: state}
}

type windowState struct {
	window events.Window
	state  map[string]string
}

// closeWindow makes the final invocation of the shard's window once that
// window has ended by now, as Lambda does when a tumbling window closes: no
// records, isFinalInvokeForWindow, and the state the function returned
// last, which is then dropped (the next window starts empty). It is made
// once: an error is logged, and the window's state is not delivered again.
func (p *streamPoller) closeWindow(ctx context.Context, shard string, now time.Time) {
	p.windowMu.Lock()
	ws, ok := p.windows[shard]
	if !ok || ws.window.End.After(now) {
		p.windowMu.Unlock()
		return
	}
	delete(p.windows, shard)
	p.windowMu.Unlock()
	payload, err := json.Marshal(events.DynamoDBTimeWindowEvent{
		DynamoDBEvent: events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{}},
		TimeWindowProperties: events.TimeWindowProperties{
			Window: ws.window, State: ws.state, ShardID: shard, EventSourceARN: p.m.StreamARN, IsFinalInvokeForWindow: true,
		}})
	if err != nil {
		p.r.log.Warn("runner: marshal a window's final invocation", "err", err)
		return
	}
	if _, err := p.r.Invoke(ctx, p.m.Function, payload); err != nil {
		p.r.log.Warn("the final invocation of a tumbling window failed", "function", p.m.Function, "shard", shard,
			"window", ws.window.Start.Format(time.RFC3339), "err", err)
	}
}

// discard sends a description of the batch to the on-failure destination,
// in the shape Lambda uses for stream event sources.
func (p *streamPoller) discard(ctx context.Context, shard string, b pending, reason string) {
	p.r.count(p.m.Function, func(s *Stats) { s.Discarded += len(b.records) })
	first, last := b.records[0], b.records[len(b.records)-1]
	f, _ := p.r.Function(p.m.Function)
	info := ddbstream.Failure{
		RequestContext:  ddbstream.FailureRequest{RequestID: newID(), FunctionARN: f.ARN, Condition: reason, ApproximateInvokeCount: b.attempts},
		ResponseContext: ddbstream.FailureResponse{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"},
		Version:         "1.0",
		Timestamp:       p.r.clock.Now().UTC().Format(time.RFC3339Nano),
		Batch: &ddbstream.FailedBatch{
			ShardID:             shard,
			StartSequenceNumber: aws.ToString(first.Dynamodb.SequenceNumber),
			EndSequenceNumber:   aws.ToString(last.Dynamodb.SequenceNumber),
			FirstArrival:        timeString(first.Dynamodb.ApproximateCreationDateTime),
			LastArrival:         timeString(last.Dynamodb.ApproximateCreationDateTime),
			BatchSize:           len(b.records),
			StreamARN:           p.m.StreamARN,
		},
	}
	p.r.log.Warn("stream batch discarded", "function", p.m.Function, "reason", reason, "records", len(b.records),
		"from", aws.ToString(first.Dynamodb.SequenceNumber), "to", aws.ToString(last.Dynamodb.SequenceNumber))
	if p.m.OnFailureQueueURL == "" || p.q == nil {
		p.r.log.Error("stream batch dropped: no on-failure destination", "function", p.m.Function)
		return
	}
	body, _ := json.Marshal(info) // strings and numbers
	if _, err := p.q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p.m.OnFailureQueueURL), MessageBody: aws.String(string(body))}); err != nil {
		p.r.log.Error("on-failure destination send failed", "queue", p.m.OnFailureQueueURL, "err", err)
	}
}

func timeString(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Mappings describes the running event sources, sorted.
func (r *Runner) Mappings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.sources))
	for _, s := range r.sources {
		out = append(out, s.kind+": "+s.desc)
	}
	sort.Strings(out)
	return out
}
