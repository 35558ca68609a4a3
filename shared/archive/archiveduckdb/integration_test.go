package archiveduckdb_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivetest"
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
	client, bucket := archivetest.MustBucket(t)
	ctx := t.Context()
	c := &archiveduckdb.Cache{Dir: t.TempDir(), S3: client, Bucket: bucket}

	if _, err := c.Sync(ctx, archiveduckdb.Filter{}); !errors.Is(err, archiveduckdb.ErrEmpty) {
		t.Fatalf("Sync of an empty bucket: %v, want ErrEmpty", err)
	}

	mustArchive(t, client, bucket, votes("ddbpipe-votes-2026-11", nov, 90), 30)
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
	got, err := db.Query(ctx, "SELECT count(*), count(DISTINCT sequenceNumber) FROM votes")
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
