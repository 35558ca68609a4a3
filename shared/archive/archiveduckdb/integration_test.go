package archiveduckdb_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

func mustPut(t *testing.T, client *s3.Client, bucket, key string, body []byte) {
	t.Helper()
	_, err := client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationSync: files the archiver wrote to S3 are copied once, kept
// while unchanged, dropped when their object goes; objects that are not
// Parquet are skipped; and DuckDB counts the rows.
func TestIntegrationSync(t *testing.T) {
	client, bucket := stacktest.Bucket(t, "archive-it")
	ctx := t.Context()
	c := &archiveduckdb.Cache{Dir: t.TempDir(), S3: client, Bucket: bucket}

	if _, err := c.Sync(ctx, archiveduckdb.Filter{}); !errors.Is(err, archiveduckdb.ErrEmpty) {
		t.Fatalf("Sync of an empty bucket: %v, want ErrEmpty", err)
	}

	mustArchive(t, client, bucket, votes("ddbpipe-votes-2026-11", nov, 90)[:90], 30)
	junk := "table=ddbpipe-votes/month=2026-11/stream-junk-0.parquet"
	mustPut(t, client, bucket, junk, []byte("<html>not parquet</html>"))
	mustPut(t, client, bucket, "table=ddbpipe-votes/month=2026-11/_manifest.json", []byte("{}"))
	mustPut(t, client, bucket, "athena-results/x.csv", []byte("a,b"))

	var progress []archiveduckdb.SyncProgress
	c.Progress = func(p archiveduckdb.SyncProgress) { progress = append(progress, p) }
	res, err := c.Sync(ctx, archiveduckdb.Filter{Table: "votes"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Downloaded != 4 || res.Reused != 0 || !reflect.DeepEqual(res.Skipped, []string{junk}) {
		t.Errorf("first sync: %d downloaded, %d reused, skipped %v; want 4, 0, [%s]", res.Downloaded, res.Reused, res.Skipped, junk)
	}
	if n := len(progress); n != 5 || progress[n-1].Done != 4 || progress[n-1].Total != 4 {
		t.Errorf("progress %+v, want 0..4 of 4", progress)
	}
	if pl := res.Listing.Partitions; len(pl) != 1 || len(pl[0].Data) != 4 || pl[0].Manifest == "" {
		t.Errorf("listing %+v, want one partition with 4 data objects and a manifest", pl)
	}

	res, err = c.Sync(ctx, archiveduckdb.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Downloaded != 0 || res.Reused != 3 || len(res.Skipped) != 1 {
		t.Errorf("second sync: %d downloaded, %d reused, %d skipped; want 0, 3, 1", res.Downloaded, res.Reused, len(res.Skipped))
	}

	// A compaction replaces two files by one: the copies follow.
	files, err := archives3.ListFiles(ctx, client, bucket, "table=ddbpipe-votes/month=2026-11/stream-2026")
	if err != nil || len(files) != 3 {
		t.Fatalf("files %v, %v", files, err)
	}
	var rows int
	for _, f := range files[:2] {
		r, err := archives3.ReadRows(ctx, client, bucket, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		rows += len(r)
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(f.Key)}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := archives3.ReadRows(ctx, client, bucket, files[2].Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archives3.PutRows(ctx, client, bucket, "table=ddbpipe-votes/month=2026-11/compacted-1.parquet", all, "", ""); err != nil {
		t.Fatal(err)
	}
	res, err = c.Sync(ctx, archiveduckdb.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Downloaded != 1 || res.Removed != 2 {
		t.Errorf("sync after compaction: %d downloaded, %d removed; want 1, 2", res.Downloaded, res.Removed)
	}

	db, err := archiveduckdb.Open(ctx, c.Root(), archiveduckdb.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Query(ctx, "SELECT count(*), count(DISTINCT sequence_number) FROM votes")
	if err != nil {
		t.Fatal(err)
	}
	// 90 rows, minus the 2×30 deleted, plus the copy of the last 30.
	if want := []any{int64(90 - rows + 30), int64(30)}; !reflect.DeepEqual(got.Rows[0], want) {
		t.Errorf("counts %v, want %v", got.Rows[0], want)
	}
	if len(db.Skipped) != 0 {
		t.Errorf("Open skipped %v: the cache should hold Parquet files only", db.Skipped)
	}

	if _, err := c.Sync(ctx, archiveduckdb.Filter{Table: "ledger"}); !errors.Is(err, archiveduckdb.ErrUnknownTable) || !strings.Contains(err.Error(), "ddbpipe-votes (view votes)") {
		t.Errorf("Sync of an unknown table: %v, want ErrUnknownTable naming the tables", err)
	}
}

// TestIntegrationNamedQueries: every named query answers exactly what the
// generated votes say, over the archiver's files in the local S3 synced to
// the cache, in the three states a month goes through: stream files only;
// compaction half done (the month's replayed state written, the stream
// files not yet deleted: both present); compacted (the replayed state
// only). The replayed file is written as the compaction writes it
// (archive.ReplayRows of the stream files' rows, archives3.PutRows at
// archive.CompactedKey).
func TestIntegrationNamedQueries(t *testing.T) {
	client, bucket := stacktest.Bucket(t, "archive-it")
	ctx := t.Context()
	novVotes := votes("ddbpipe-votes-2026-11", nov, 300)
	decVotes := votes("ddbpipe-votes-2026-12", dec, 60)
	mustArchive(t, client, bucket, novVotes, 40)
	mustArchive(t, client, bucket, decVotes, 25)
	vs := append(novVotes, decVotes...)
	s := events.NewStringAttribute
	v1 := map[string]events.DynamoDBAttributeValue{"pk": s("docs/a.txt"), "sk": s("v#1"), "size": events.NewNumberAttribute("12")}
	v2 := map[string]events.DynamoDBAttributeValue{"pk": s("docs/a.txt"), "sk": s("v#1"), "size": events.NewNumberAttribute("14")}
	other := map[string]events.DynamoDBAttributeValue{"pk": s("docs/b.txt"), "sk": s("v#1")}
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: client, Bucket: bucket}}
	if res := a.Archive(ctx, []events.DynamoDBEventRecord{
		objectChange(1, "INSERT", "docs/a.txt", "v#1", at, v1, nil),
		objectChange(2, "INSERT", "docs/b.txt", "v#1", at, other, nil),
		objectChange(3, "MODIFY", "docs/a.txt", "v#1", at.Add(time.Hour), v2, v1),
		objectChange(4, "REMOVE", "docs/a.txt", "v#1", at.Add(72*time.Hour), nil, v2),
	}); res.Err != nil {
		t.Fatal(res.Err)
	}

	c := &archiveduckdb.Cache{Dir: t.TempDir(), S3: client, Bucket: bucket}
	check := func(state string, wantNovRows, wantReplayed int64) {
		t.Helper()
		if _, err := c.Sync(ctx, archiveduckdb.Filter{}); err != nil {
			t.Fatal(err)
		}
		db, err := archiveduckdb.Open(ctx, c.Root(), archiveduckdb.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		res := mustQuery(t, db, "SELECT count(*), count(*) FILTER (WHERE replayed) FROM votes WHERE month = '2026-11'")
		if got := []any{res.Rows[0][0], res.Rows[0][1]}; !reflect.DeepEqual(got, []any{wantNovRows, wantReplayed}) {
			t.Fatalf("%s: November's rows (all, replayed) = %v, want %d, %d", state, got, wantNovRows, wantReplayed)
		}
		t.Run(state, func(t *testing.T) {
			checkNamedQueries(t, db, vs, "2026-11")
			checkNamedQueries(t, db, vs, "2026-12")
		})
	}
	n := int64(len(novVotes))
	check("stream files only", n, 0)

	// The compaction of November's votes: its replayed state first ...
	prefix := "table=ddbpipe-votes/month=2026-11/"
	streamFiles, err := archives3.ListFiles(ctx, client, bucket, prefix+"stream-")
	if err != nil || len(streamFiles) < 2 {
		t.Fatalf("stream files %v, %v", streamFiles, err)
	}
	var rows []archive.Row
	for _, f := range streamFiles {
		r, err := archives3.ReadRows(ctx, client, bucket, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	replayed := archive.ReplayRows(rows)
	p := archive.Partition{Table: "ddbpipe-votes", Month: "2026-11"}
	key := archive.CompactedKey(p, streamFiles)
	if !strings.HasPrefix(key, prefix) {
		t.Fatalf("compacted key %s is not under %s", key, prefix)
	}
	if _, err := archives3.PutRows(ctx, client, bucket, key, replayed, "", ""); err != nil {
		t.Fatal(err)
	}
	check("compaction half done", 2*n, n)

	// ... then the stream files go.
	for _, f := range streamFiles {
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(f.Key)}); err != nil {
			t.Fatal(err)
		}
	}
	check("compacted", n, n)
}
