package voteslambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// recordingTally keeps what the handler passed it and answers res.
type recordingTally struct {
	shard votes.StreamShard
	recs  []votes.LedgerRecord
	res   votes.TallyResult
}

func (r *recordingTally) Count(_ context.Context, s votes.StreamShard, recs []votes.LedgerRecord) votes.TallyResult {
	r.shard, r.recs = s, recs
	return r.res
}

const ledgerStream = "arn:aws:dynamodb:eu-west-1:000000000000:table/app-votes-2026-11/stream/2026-11-01T00:00:00.000"

// streamEvent builds a tumbling-window event from the JSON of its records,
// as Lambda sends it.
func streamEvent(t *testing.T, shard, records string) events.DynamoDBTimeWindowEvent {
	t.Helper()
	var ev events.DynamoDBTimeWindowEvent
	doc := `{"Records":` + records + `,"shardId":"` + shard + `","eventSourceARN":"` + ledgerStream + `","window":{"start":"2026-11-21T10:00:00Z","end":"2026-11-21T10:01:00Z"}}`
	if err := json.Unmarshal([]byte(doc), &ev); err != nil {
		t.Fatalf("event: %v", err)
	}
	return ev
}

func streamRecord(name, seq, image string) string {
	return `{"eventName":"` + name + `","eventSourceARN":"` + ledgerStream + `","dynamodb":{"SequenceNumber":"` + seq + `","NewImage":` + image + `}}`
}

// The tally's entry point takes whatever the stream holds: votes, items
// that are not votes, wrong types, removals; only votes count, every
// record passes to the tally in order (so the checkpoint passes it), and
// an event that names no shard or no table is an error, never a guess.
func TestStreamHandler(t *testing.T) {
	vote := `{"pk":{"S":"p#3"},"sk":{"S":"u#v"},"pollId":{"S":"p"},"optionId":{"S":"a"},"countedAt":{"S":"2026-11-21T10:00:00.5Z"}}`
	tests := []struct {
		name     string
		shard    string
		records  string
		err      error  // the handler's error
		votes    int    // records the tally got as votes
		notVotes int    // INSERTs logged as not votes
		seqs     string // the sequence numbers passed, in order
	}{
		{name: "a vote", shard: "shardId-1", records: "[" + streamRecord("INSERT", "100", vote) + "]", votes: 1, seqs: "100"},
		{name: "the window's final, empty invocation", shard: "shardId-1", records: "[]"},
		{name: "no shard id (a mapping without a tumbling window)", records: "[" + streamRecord("INSERT", "100", vote) + "]", err: ErrNoShard},
		{name: "an item that is not a vote", shard: "s", records: "[" + streamRecord("INSERT", "7", `{"pk":{"S":"#closed#0"},"sk":{"S":"#closed"}}`) + "]", notVotes: 1, seqs: "7"},
		{name: "pollId of the wrong type", shard: "s", records: "[" + streamRecord("INSERT", "8", `{"pollId":{"N":"1"},"optionId":{"S":"a"}}`) + "]", notVotes: 1, seqs: "8"},
		{name: "empty optionId", shard: "s", records: "[" + streamRecord("INSERT", "9", `{"pollId":{"S":"p"},"optionId":{"S":""}}`) + "]", notVotes: 1, seqs: "9"},
		{name: "a removal and a modification count nothing", shard: "s",
			records: "[" + streamRecord("REMOVE", "10", "{}") + "," + streamRecord("MODIFY", "11", vote) + "," + streamRecord("INSERT", "12", vote) + "]", votes: 1, seqs: "10 11 12"},
		{name: "a 10,000-character option id is passed as it is (the poll check is the tally's)", shard: "s",
			records: "[" + streamRecord("INSERT", "13", `{"pollId":{"S":"p"},"optionId":{"S":"`+strings.Repeat("x", 10000)+`"}}`) + "]", votes: 1, seqs: "13"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingTally{}
			var logs, metrics bytes.Buffer
			h := &Stream{Tally: rec, Metrics: emf.New(&metrics, "ddbpipe", nil), Log: slog.New(slog.NewJSONHandler(&logs, nil))}
			resp, err := h.Handle(context.Background(), streamEvent(t, tt.shard, tt.records))
			if !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if len(resp.BatchItemFailures) != 0 {
				t.Errorf("failures %v", resp.BatchItemFailures)
			}
			var seqs []string
			n := 0
			for _, r := range rec.recs {
				seqs = append(seqs, r.Seq)
				if r.Vote {
					n++
				}
			}
			if strings.Join(seqs, " ") != tt.seqs || n != tt.votes {
				t.Errorf("tally got %v (%d votes), want %s (%d)", seqs, n, tt.seqs, tt.votes)
			}
			if len(rec.recs) > 0 && (rec.shard != votes.StreamShard{Table: "app-votes-2026-11", Shard: tt.shard}) {
				t.Errorf("shard %+v", rec.shard)
			}
			if tt.notVotes > 0 && !strings.Contains(logs.String(), `"notVotes":1`) {
				t.Errorf("no warning for the record that is not a vote:\n%s", logs.String())
			}
		})
	}
}

// What the tally did not count comes back as the first record to deliver
// again; a vote's written time is the ledger item's.
func TestStreamHandlerRetriesFromTheTallysRecord(t *testing.T) {
	vote := `{"pollId":{"S":"p"},"optionId":{"S":"a"},"countedAt":{"S":"2026-11-21T10:00:00.5Z"}}`
	rec := &recordingTally{res: votes.TallyResult{RetryFrom: "200"}}
	h := &Stream{Tally: rec, Log: slog.New(slog.DiscardHandler)}
	resp, err := h.Handle(context.Background(), streamEvent(t, "s", "["+streamRecord("INSERT", "100", vote)+","+streamRecord("INSERT", "200", vote)+"]"))
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "200" {
		t.Fatalf("response %+v, %v; want a retry from 200", resp, err)
	}
	if got := rec.recs[0].WrittenAt.Format("15:04:05.000"); got != "10:00:00.500" {
		t.Errorf("written at %s, want the item's countedAt", got)
	}
}
