package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// The tally writes checkpoints (votesddb) and the rotator's drain reads
// them (archiveddb), each by shared/ledger's contract (the key, the
// attribute names, the order of sequence numbers): neither flow links the
// other's adapter. A checkpoint the votes flow commits is the one the
// rotator reads: a shard is counted once its last record is at or below
// its checkpoint.
func TestTallyCheckpointsAgree(t *testing.T) {
	c := newClients(t, nil)
	ctx := t.Context()
	counters := unique("counters")
	if _, err := c.db.CreateTable(ctx, archiveddb.CreateInput(archive.Spec{Name: counters})); err != nil {
		t.Fatal(err)
	}
	store := votesddb.New(c.db, counters, "app-votes")
	ledger := store.LedgerTable("2026-11")
	seq := func(n int) string { return fmt.Sprintf("%021d", n) }
	if err := store.CommitTally(ctx, votes.StreamShard{Table: ledger, Shard: "shard-a"}, "", votes.TallyCommit{Seq: seq(200), Votes: 2}); err != nil {
		t.Fatal(err)
	}
	recs := []archive.StreamRecord{
		{Shard: "shard-a", SequenceNumber: seq(100)}, {Shard: "shard-a", SequenceNumber: seq(200)}, // counted
		{Shard: "shard-b", SequenceNumber: seq(150)}, // no checkpoint yet
	}
	got, err := (&archiveddb.TallyCheckpoints{DB: c.db, Table: counters}).Uncounted(ctx, ledger, recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Shard != "shard-b" {
		t.Errorf("uncounted %+v, want shard-b's one record", got)
	}
	// The votes the checkpoints counted, summed over the month's shards,
	// are what the rotator compares with the month's items.
	if err := store.CommitTally(ctx, votes.StreamShard{Table: ledger, Shard: "shard-a"}, seq(200), votes.TallyCommit{Seq: seq(300), Votes: 3}); err != nil {
		t.Fatal(err)
	}
	if err := store.CommitTally(ctx, votes.StreamShard{Table: ledger, Shard: "shard-b"}, "", votes.TallyCommit{Seq: seq(150), Votes: 4}); err != nil {
		t.Fatal(err)
	}
	if err := store.CommitTally(ctx, votes.StreamShard{Table: store.LedgerTable("2026-12"), Shard: "shard-c"}, "", votes.TallyCommit{Seq: seq(1), Votes: 100}); err != nil {
		t.Fatal(err)
	}
	if n, err := (&archiveddb.TallyCheckpoints{DB: c.db, Table: counters}).Tallied(ctx, ledger); err != nil || n != 9 {
		t.Errorf("tallied %d, %v; want 9 (2 + 3 on shard-a, 4 on shard-b; December's not)", n, err)
	}
}

// A checkpoint without an attribute of the contract is an error for each
// of its readers, never a shard passed over: read as no checkpoint, the
// tally would count the shard again, the drain would wait on it forever,
// and the retirement would sum its votes as none.
func TestCheckpointMissingAnAttribute(t *testing.T) {
	c := newClients(t, nil)
	ctx := t.Context()
	counters := unique("counters")
	if _, err := c.db.CreateTable(ctx, archiveddb.CreateInput(archive.Spec{Name: counters})); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	store := votesddb.New(c.db, counters, "app-votes")
	table := store.LedgerTable(ledger.MonthOf(now))
	checkpoints := &archiveddb.TallyCheckpoints{DB: c.db, Table: counters}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	for _, tt := range []struct {
		lacks string
		read  func(shard string) error
	}{
		{ledger.CheckpointSeq, func(shard string) error {
			_, err := store.Checkpoint(ctx, votes.StreamShard{Table: table, Shard: shard})
			return err
		}},
		{ledger.CheckpointSeq, func(shard string) error {
			_, err := checkpoints.Uncounted(ctx, table, []archive.StreamRecord{{Shard: shard, SequenceNumber: "000000000000000000100"}})
			return err
		}},
		{ledger.CheckpointVotes, func(string) error {
			_, err := checkpoints.Tallied(ctx, table)
			return err
		}},
		{ledger.CheckpointAt, func(string) error {
			_, err := store.Staleness(ctx, now)
			return err
		}},
	} {
		shard := "shard-without-" + tt.lacks
		t.Run(shard, func(t *testing.T) {
			item := map[string]types.AttributeValue{
				ledger.AttrPK: s(ledger.CheckpointPK(table)), ledger.AttrSK: s(shard),
				ledger.CheckpointSeq: s("000000000000000000050"), ledger.CheckpointVotes: &types.AttributeValueMemberN{Value: "2"},
				ledger.CheckpointAt: s(now.Format(time.RFC3339Nano)),
			}
			delete(item, tt.lacks)
			if _, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(counters), Item: item}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = c.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(counters),
					Key: map[string]types.AttributeValue{ledger.AttrPK: item[ledger.AttrPK], ledger.AttrSK: item[ledger.AttrSK]}})
			})
			err := tt.read(shard)
			if !errors.Is(err, ledger.ErrMissingAttribute) || !strings.Contains(err.Error(), shard) {
				t.Errorf("got %v, want ledger.ErrMissingAttribute naming %s", err, shard)
			}
		})
	}
}

// The archive flow's functions link the archive flow and the platform only:
// no votes or objects package, nothing of the local AWS.
func TestArchiveFunctionsLinkOnlyTheirFlow(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../functions/rotator", "../functions/archiver").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/ddbpipe/ddbpipe/"
	var linked []string
	for _, pkg := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		linked = append(linked, rest)
		for _, banned := range []string{"shared/votes", "shared/objects", "local/"} {
			if strings.HasPrefix(rest, banned) {
				t.Errorf("the archive functions link %s", pkg)
			}
		}
	}
	if len(linked) == 0 {
		t.Fatalf("go list named no package of the module:\n%s", out)
	}
}

// rotatorAt builds the rotator of the local stack, as the function wires
// it (with its role's credentials), with its clock pinned to now.
func rotatorAt(t *testing.T, env *stack.Env, now time.Time, log *slog.Logger) *archive.Rotator {
	t.Helper()
	r := archivelambda.NewRotation(env.AWSAs("RotatorFunction"), archivelambda.RotatorConfig{
		LedgerPrefix: env.Vars["LEDGER_TABLE_PREFIX"], Bucket: env.Vars["ARCHIVE_BUCKET_NAME"], GraceDays: 2,
		Archiver: env.Vars["ARCHIVER_FUNCTION_ARN"], FailureQueueARN: env.Stack.Resources["StreamFailuresQueue"].Attrs["Arn"],
		MaxRetryAttempts: 5, MaxRecordAgeSeconds: 21600,
		WindowSeconds: 1, // the archive catches up in a second, not ten: the test waits less
		Tally:         env.Vars["TALLY_FUNCTION_ARN"], TallyWindowSeconds: 60, TallyBatchWindow: 1, CountersTable: env.Vars["COUNTERS_TABLE_NAME"],
	}, log)
	r.Now = func() time.Time { return now }
	r.Policy.DrainWait, r.Policy.DrainPoll = 2*time.Minute, time.Second
	return r
}

var (
	midNovember = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// coldNovember is after November's end, its grace (2 days) and the
	// fence margin (1 hour): the day's run retires it.
	coldNovember = time.Date(2026, 12, 3, 1, 30, 0, 0, time.UTC)
)

// sendNovemberVotes sends n distinct votes for poll, cast in November
// from midNovember on, k seconds after it for vote k (the stack's clock
// is at midNovember: upLocalAt).
func sendNovemberVotes(t *testing.T, env *stack.Env, poll string, from, n int) {
	t.Helper()
	options := []string{"red", "green", "blue"}
	vs := make([]votes.Vote, n)
	for i := range vs {
		k := from + i
		vs[i] = votes.Vote{VoteID: fmt.Sprintf("%s-%05d", poll, k), PollID: poll, OptionID: options[(k*7)%3],
			VoterID: fmt.Sprintf("voter-%d", k), CastAt: midNovember.Add(time.Duration(k) * time.Second)}
	}
	res, err := votessqs.NewProducer(env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"]).Send(context.Background(), vs)
	if err != nil || res.Sent != n {
		t.Fatalf("send: %v (%d of %d sent)", err, res.Sent, n)
	}
}

func partitionOf(env *stack.Env) archive.Partition {
	return archive.Partition{Table: env.Vars["LEDGER_TABLE_PREFIX"], Month: "2026-11"}
}

// archiveObjects lists the partition's objects.
func archiveObjects(t *testing.T, env *stack.Env) []archive.File {
	t.Helper()
	files, err := archives3.ListFiles(context.Background(), env.Clients.S3, env.Vars["ARCHIVE_BUCKET_NAME"], partitionOf(env).Prefix())
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// archivedVotes replays the partition's rows into counts per option, as
// an analyst's query over the archive would.
func archivedVotes(t *testing.T, env *stack.Env, poll string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var sets [][]archive.Row
	for _, f := range archiveObjects(t, env) {
		if !strings.HasSuffix(f.Key, ".parquet") {
			continue
		}
		rows, err := archives3.ReadRows(ctx, env.Clients.S3, env.Vars["ARCHIVE_BUCKET_NAME"], f.Key)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, rows)
	}
	final := map[string]archive.Row{}
	for _, r := range archive.MergeRows(sets...) { // sorted by sequence: the last row of a key wins
		final[r.Keys] = r
	}
	counts := map[string]int64{}
	for _, r := range final {
		if r.EventName == archive.EventRemove {
			continue
		}
		img, err := archive.ParseImage(r.NewImage)
		if err != nil {
			t.Fatalf("image %s: %v", r.NewImage, err)
		}
		if img["pollId"] == poll {
			counts[img["optionId"].(string)]++
		}
	}
	return counts
}

// queriedVotes answers "votes per option for poll P in November" the way an
// analyst does: the named query votes-per-option, in DuckDB, over a fresh
// copy of the partition's files.
func queriedVotes(t *testing.T, env *stack.Env, poll string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	p := partitionOf(env)
	cache := &archiveduckdb.Cache{Dir: t.TempDir(), S3: env.Clients.S3, Bucket: env.Vars["ARCHIVE_BUCKET_NAME"]}
	f := archiveduckdb.Filter{Table: p.Table, Month: p.Month}
	if _, err := cache.Sync(ctx, f); err != nil {
		t.Fatal(err)
	}
	db, err := archiveduckdb.Open(ctx, cache.Root(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := archive.LookupNamedQuery("votes-per-option")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Query(ctx, q.SQL, p.Month, poll)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, r := range res.Rows {
		counts[r[0].(string)] = r[1].(int64)
	}
	return counts
}

// sameCounts fails unless the archive's answers equal the counters'.
func sameCounts(t *testing.T, when string, got, want map[string]int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: votes-per-option %v, the counters hold %v", when, got, want)
	}
}

func tableExists(t *testing.T, env *stack.Env, name string) bool {
	t.Helper()
	_, err := env.Clients.DynamoDB.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil && !archiveddb.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// verifyArchive compares the archive with a Scan of the table.
func verifyArchive(t *testing.T, r *archive.Rotator, env *stack.Env, table string) archive.Report {
	t.Helper()
	c, err := r.Archive.Read(context.Background(), partitionOf(env))
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Tables.Scan(context.Background(), table, false)
	if err != nil {
		t.Fatal(err)
	}
	return archive.Verify(c.State, s.State)
}

// The proof of rotation, on a stack whose clock is at midNovember: the
// stack's own rotator run created and subscribed November and December, so
// November's votes reach the ledger, the counters and the archive. On 3
// December the rotator creates the coming month, verifies, compacts and
// deletes November (after a crash mid-compaction that leaves a verifiable
// archive), a second run changes nothing, and no later run, whatever its
// clock, creates November again. The archive replays to exactly the counters.
func TestRotationRetiresNovember(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	env := upLocalAt(t, midNovember)
	ctx := context.Background()
	prefix := env.Vars["LEDGER_TABLE_PREFIX"]
	november := prefix + "-2026-11"
	createPoll(t, env, `{"pollId":"nov","options":["red","green","blue"],"shards":4}`)
	for _, m := range []string{november, prefix + "-2026-12"} {
		if !tableExists(t, env, m) {
			t.Fatalf("%s does not exist after local up (its rotator run)", m)
		}
	}
	sendNovemberVotes(t, env, "nov", 0, 1500)
	// Mid-month the rotator has nothing to do.
	if rep := rotatorAt(t, env, midNovember, testLogger(t)).Run(ctx); rep.Err() != nil || len(rep.Created)+len(rep.Subscribed)+len(rep.Retirements) != 0 {
		t.Errorf("mid-November: created %v, subscribed %v, retired %v (%v); want nothing done", rep.Created, rep.Subscribed, rep.Retirements, rep.Err())
	}
	var total int64
	// 6 minutes: beside the search tests (their calls judged by the same
	// IAM judge, on the same DynamoDB Local), the last votes trickle in
	// (1,353 of 1,500 after 3 minutes in a fresh make test; 26 s alone).
	eventually(t, 6*time.Minute, "every vote counted", func() bool {
		total = getResults(t, env, "nov").Total
		return total == 1500
	}, func() string { return fmt.Sprintf("%d of 1,500 counted", total) })
	counted := getResults(t, env, "nov")

	// A crash mid-compaction: the manifest cannot be written.
	env.Proxies[faultproxy.S3].SetFaults(faultproxy.Faults{ServerErrorRate: 1, ServerErrorStatus: 500,
		Match: func(op faultproxy.Operation) bool {
			return op.Action == "PutObject" && strings.HasSuffix(op.Key, "_manifest.json")
		}})
	start := time.Now()
	crashed := rotatorAt(t, env, coldNovember, testLogger(t)).Run(ctx)
	env.Proxies[faultproxy.S3].SetFaults(faultproxy.Faults{})
	if want := []string{prefix + "-2027-01"}; fmt.Sprint(crashed.Created) != fmt.Sprint(want) {
		t.Errorf("created %v, want %v", crashed.Created, want)
	}
	if len(crashed.Retirements) != 1 || crashed.Retirements[0].Outcome != archive.Failed {
		t.Fatalf("crashed run: %+v, want November's retirement failed", crashed.Retirements)
	}
	// Before it failed, the run compared the counters with the archive: the
	// tally's checkpoints counted every vote once.
	if c := crashed.Retirements[0].Counters; c == nil || c.Tallied != 1500 || c.Differ() != 0 {
		t.Errorf("counters check %+v, want 1500 votes tallied for 1500 items", c)
	}
	// A vote counted twice (a checkpoint's count raised by hand, as a
	// tally that ignored its checkpoint would): the re-run alarms, and
	// still retires the month, whose archive is complete.
	ckpts, err := env.Clients.DynamoDB.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(env.Vars["COUNTERS_TABLE_NAME"]), KeyConditionExpression: aws.String("pk = :pk"), Limit: aws.Int32(1),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: ledger.CheckpointPK(november)}},
	})
	if err != nil || len(ckpts.Items) != 1 {
		t.Fatalf("November's checkpoints: %v, %v", ckpts, err)
	}
	if _, err := env.Clients.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(env.Vars["COUNTERS_TABLE_NAME"]), Key: map[string]types.AttributeValue{"pk": ckpts.Items[0]["pk"], "sk": ckpts.Items[0]["sk"]},
		UpdateExpression: aws.String("ADD votes :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	}); err != nil {
		t.Fatal(err)
	}
	if !tableExists(t, env, november) {
		t.Fatal("the table was deleted although compaction failed")
	}
	objects := len(archiveObjects(t, env))
	r := rotatorAt(t, env, coldNovember, testLogger(t))
	if rep := verifyArchive(t, r, env, november); !rep.OK() || rep.TableItems != 1500 {
		t.Errorf("after the crash (%d objects: inputs and the merged file): %s", objects, rep)
	}
	t.Logf("crashed run: %s, %d objects left", time.Since(start).Round(time.Millisecond), objects)
	// The month's state and the stream's files are both there: the named
	// query still counts each vote once.
	sameCounts(t, "compaction half done", queriedVotes(t, env, "nov"), counted.Totals)

	// The re-run completes.
	var logs bytes.Buffer
	r.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	start = time.Now()
	rep := r.Run(ctx)
	took := time.Since(start)
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	archivelambda.ReportRotation(ctx, r.Log, emf.New(&logs, "ddbpipe", map[string]string{"Function": "rotator"}), rep)
	if !strings.Contains(logs.String(), `"CountersDiffer":1`) || !strings.Contains(logs.String(), "the counters differ from the archive by +1") {
		t.Errorf("no CountersDiffer alarm metric or log for a vote counted twice in:\n%s", logs.String())
	}
	if !tableExists(t, env, prefix+"-2026-12") {
		t.Error("December's table does not exist")
	}
	if len(rep.Retirements) != 1 || rep.Retirements[0].Outcome != archive.Retired {
		t.Fatalf("retirements %+v, want November retired", rep.Retirements)
	}
	ret := rep.Retirements[0]
	if !ret.Verification.OK() || ret.Verification.TableItems != 1500 {
		t.Errorf("verification: %s", ret.Verification)
	}
	if tableExists(t, env, november) {
		t.Error("November's table still exists")
	}
	after := archiveObjects(t, env)
	if len(after) > 2 {
		t.Errorf("%d objects after compaction, want at most 2: %v", len(after), after)
	}
	c, err := r.Archive.Read(ctx, partitionOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if c.Manifest == nil || c.Manifest.Rows != c.Rows || !c.Manifest.Drift(c.Files).OK() || c.Manifest.Verification == nil || !c.Manifest.Verification.OK {
		t.Errorf("manifest %+v does not describe the archive's %d files", c.Manifest, len(c.Files))
	}
	got := archivedVotes(t, env, "nov")
	for o, n := range counted.Totals {
		if got[o] != n {
			t.Errorf("option %s: %d archived, %d counted", o, got[o], n)
		}
	}
	sameCounts(t, "retired", queriedVotes(t, env, "nov"), counted.Totals)
	t.Logf("rotation: %s (scan %s, verification %s of 1500 items), compaction %d files → %d objects with the manifest, crash run left %d",
		took.Round(time.Millisecond), ret.ScanTook.Round(time.Millisecond), ret.VerifyTook.Round(time.Millisecond), ret.Compaction.FilesBefore, len(after), objects)

	// Twice: nothing changes.
	rep = r.Run(ctx)
	if err := rep.Err(); err != nil || len(rep.Created)+len(rep.Subscribed)+len(rep.Retirements) != 0 {
		t.Errorf("second run did something: %+v %v", rep, err)
	}
	if again := archiveObjects(t, env); fmt.Sprint(again) != fmt.Sprint(after) {
		t.Errorf("objects changed: %v → %v", after, again)
	}
	// A run told it is mid-November again (a wrong clock, `tables rotate
	// -now`) does not bring November back: its verified manifest is the
	// durable record that it was retired.
	back := rotatorAt(t, env, midNovember, testLogger(t)).Run(ctx)
	if back.Err() == nil || !strings.Contains(back.Err().Error(), "retired") || tableExists(t, env, november) {
		t.Errorf("a mid-November run after the retirement: %v, November exists: %v; want it refused", back.Err(), tableExists(t, env, november))
	}
}

// Verification catches a lost archive file: the table is kept, the
// snapshot export completes the archive, and an alarm is raised.
func TestRotationSnapshotWhenAFileIsMissing(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	env := upLocalAt(t, midNovember)
	ctx := context.Background()
	prefix := env.Vars["LEDGER_TABLE_PREFIX"]
	november := prefix + "-2026-11"
	createPoll(t, env, `{"pollId":"lost","options":["red","green","blue"],"shards":2}`)
	// Three waves, so the archive holds several files.
	for wave := range 3 {
		sendNovemberVotes(t, env, "lost", wave*100, 100)
		eventually(t, 2*time.Minute, "the wave counted and archived", func() bool {
			return getResults(t, env, "lost").Total == int64(100*(wave+1)) && len(archiveObjects(t, env)) > wave
		})
	}
	r := rotatorAt(t, env, midNovember, testLogger(t))
	eventually(t, time.Minute, "every vote archived", func() bool { return verifyArchive(t, r, env, november).OK() })
	files := archiveObjects(t, env)
	if _, err := env.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(env.Vars["ARCHIVE_BUCKET_NAME"]), Key: aws.String(files[0].Key)}); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	rep := rotatorAt(t, env, coldNovember, log).Run(ctx)
	archivelambda.ReportRotation(ctx, log, emf.New(&logs, "ddbpipe", map[string]string{"Function": "rotator"}), rep)
	if len(rep.Retirements) != 1 {
		t.Fatalf("retirements %+v", rep.Retirements)
	}
	ret := rep.Retirements[0]
	if ret.Outcome != archive.Alarm || ret.Err != nil {
		t.Fatalf("outcome %s (%v), want alarm", ret.Outcome, ret.Err)
	}
	if ret.Verification.OK() || len(ret.Verification.Missing) == 0 {
		t.Errorf("first verification %s, want items missing", ret.Verification)
	}
	if ret.Reverification == nil || !ret.Reverification.OK() {
		t.Errorf("after the snapshot: %v, want verified", ret.Reverification)
	}
	if !tableExists(t, env, november) {
		t.Fatal("an unverified table was deleted")
	}
	if rep := verifyArchive(t, r, env, november); !rep.OK() || rep.TableItems != 300 {
		t.Errorf("the archive is not complete: %s", rep)
	}
	if !strings.Contains(logs.String(), `"RotationAlarms":1`) || !strings.Contains(logs.String(), "ALARM") {
		t.Errorf("no alarm metric or log in:\n%s", logs.String())
	}
	snap := false
	for _, f := range archiveObjects(t, env) {
		snap = snap || strings.Contains(f.Key, "snapshot-")
	}
	c, err := r.Archive.Read(ctx, partitionOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if c.Manifest == nil || c.Manifest.Verification == nil || !c.Manifest.Verification.Snapshot {
		t.Errorf("manifest %+v, want its verification to record the snapshot (snapshot file present: %v)", c.Manifest, snap)
	}
	if got := archivedVotes(t, env, "lost"); got["red"]+got["green"]+got["blue"] != 300 {
		t.Errorf("archived votes %v, want 300", got)
	}
	// Repaired by the snapshot and compacted: the named query is exact.
	totals := getResults(t, env, "lost").Totals
	sameCounts(t, "repaired by a snapshot", queriedVotes(t, env, "lost"), totals)

	// The next day's run finds the month drained (by the run before, the
	// stream off since), verifies it without a snapshot and retires it.
	next := rotatorAt(t, env, coldNovember.Add(24*time.Hour), testLogger(t)).Run(ctx)
	if len(next.Retirements) != 1 || next.Retirements[0].Outcome != archive.Retired {
		t.Fatalf("next day: %+v, want November retired", next.Retirements)
	}
	if tableExists(t, env, november) {
		t.Error("November's table still exists")
	}
	sameCounts(t, "retired after the repair", queriedVotes(t, env, "lost"), totals)
}
