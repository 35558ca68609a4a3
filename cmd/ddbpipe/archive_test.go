package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
)

func TestArchiveCommandErrors(t *testing.T) {
	state := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no SQL", []string{"archive", "query", "-state-dir", state}, "usage: ddbpipe archive query"},
		{"two statements", []string{"archive", "query", "SELECT 1", "SELECT 2", "-state-dir", state}, "one SQL statement, quoted"},
		{"SQL and named", []string{"archive", "query", "SELECT 1", "-named", "voter-history"}, "not both"},
		{"unknown named query", []string{"archive", "query", "-named", "nope"}, `no named query "nope"`},
		{"named query without its argument", []string{"archive", "query", "-named", "voter-history"}, "takes 2 arguments (month (YYYY-MM), voter id), got 0"},
		{"named query arguments in the wrong order", []string{"archive", "query", "-named", "votes-per-option", "-arg", "color", "-arg", "2026-11"},
			`argument 1 is the month (YYYY-MM), and "color" is not one (its arguments, in order: month (YYYY-MM), poll id)`},
		{"bad format", []string{"archive", "query", "SELECT 1", "-format", "xml"}, `-format "xml"`},
		{"bad month", []string{"archive", "ls", "-month", "2026-13", "-bucket", "b", "-state-dir", state}, "want YYYY-MM"},
		{"no bucket", []string{"archive", "ls", "-state-dir", state}, "no archive bucket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ARCHIVE_BUCKET_NAME", "")
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if err == nil {
				t.Fatalf("no error; stdout %s", stdout.String())
			}
			if got := err.Error() + stderr.String(); !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestArchiveListNamed(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"archive", "query", "-list"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, q := range archive.NamedQueries {
		if !strings.Contains(stdout.String(), q.Name) {
			t.Errorf("-list does not show %s", q.Name)
		}
	}
}

// TestArchiveCommands: votes archived to the local S3 server by the
// archiver; `archive ls` and `archive query` (SQL and named) read them
// through a local.env, as after `ddbpipe local up`.
func TestArchiveCommands(t *testing.T) {
	st := stacktest.Need(t)
	ctx := t.Context()
	client := s3.NewFromConfig(stacktest.Config(t, st, nil), func(o *s3.Options) { o.UsePathStyle = true })
	bucket := fmt.Sprintf("cli-archive-%d", time.Now().UnixNano())
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		files, _ := archives3.ListFiles(context.Background(), client, bucket, "")
		for _, f := range files {
			_, _ = client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(f.Key)})
		}
		_, _ = client.DeleteBucket(context.Background(), &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})

	state := t.TempDir()
	env := fmt.Sprintf("export AWS_REGION='%s'\nexport AWS_ACCESS_KEY_ID='%s'\nexport AWS_SECRET_ACCESS_KEY='%s'\nexport AWS_ENDPOINT_URL_S3='%s'\nexport AWS_S3_USE_PATH_STYLE='true'\nexport ARCHIVE_BUCKET_NAME='%s'\nexport LEDGER_TABLE_PREFIX='ddbpipe-votes'\n",
		servers.Region, servers.AccessKeyID, servers.SecretAccessKey, st.S3, bucket)
	if err := os.WriteFile(filepath.Join(state, "local.env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(ctx, append(args, "-state-dir", state), &stdout, &stderr); err != nil {
			t.Fatalf("ddbpipe %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}

	// A fresh stack's archive holds nothing yet: its tables' views are
	// empty, and the queries answer no rows instead of failing.
	if out, _ := cli("archive", "query", "SELECT count(*) AS n FROM votes", "-format", "csv"); out != "n\n0\n" {
		t.Errorf("count on an empty archive: %q, want n 0", out)
	}
	if out, _ := cli("archive", "query", "-named", "votes-per-option", "-arg", "2026-11", "-arg", "color", "-format", "json"); out != "[]\n" {
		t.Errorf("votes-per-option on an empty archive: %q, want []", out)
	}

	// 60 votes in batches of 20: 3 files; 2 polls; voter-3 votes 3 times.
	a := &archivelambda.Archiver{Files: archives3.Writer{S3: client, Bucket: bucket}}
	start := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	perPoll := map[string]int{}
	for b := 0; b < 3; b++ {
		var batch []events.DynamoDBEventRecord
		for i := b * 20; i < (b+1)*20; i++ {
			poll := []string{"color", "lunch"}[i%2]
			perPoll[poll]++
			batch = append(batch, cliVote(i, poll, fmt.Sprintf("voter-%d", i%20), start.Add(time.Duration(i)*time.Hour)))
		}
		if res := a.Archive(ctx, batch); res.Err != nil {
			t.Fatal(res.Err)
		}
	}

	out, _ := cli("archive", "ls", "-files")
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || strings.Join(strings.Fields(lines[1])[:4], " ") != "ddbpipe-votes 2026-11 3 60" ||
		!strings.Contains(lines[1], "none (month open or not retired)") || !strings.HasSuffix(strings.TrimSpace(lines[2]), ".parquet") {
		t.Errorf("archive ls -files:\n%s", out)
	}

	out, progress := cli("archive", "query", "SELECT poll_id AS poll, count(*) AS n FROM votes GROUP BY 1 ORDER BY 1", "-format", "json")
	want := fmt.Sprintf("[{\"poll\":\"color\",\"n\":%d},\n{\"poll\":\"lunch\",\"n\":%d}]\n", perPoll["color"], perPoll["lunch"])
	if out != want {
		t.Errorf("query output\n%s\nwant\n%s", out, want)
	}
	if !strings.Contains(progress, "downloading 3/3 files") {
		t.Errorf("no download progress on stderr: %q", progress)
	}
	// The second query reuses the copies.
	if _, progress := cli("archive", "query", "SELECT 1", "-format", "csv"); strings.Contains(progress, "downloading") {
		t.Errorf("second query downloaded again: %q", progress)
	}

	out, _ = cli("archive", "query", "-named", "voter-history", "-arg", "2026-11", "-arg", "voter-3", "-format", "csv")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1+3 || lines[0] != "cast_at,poll_id,option_id,vote_id,counted_at" {
		t.Errorf("voter-3's history:\n%s\nwant a header and 3 votes", out)
	}
	out, _ = cli("archive", "query", "-named", "votes-per-poll-per-day", "-arg", "2026-11")
	if !strings.Contains(out, "2026-11-20") || !strings.Contains(out, "rows)") {
		t.Errorf("votes per poll per day:\n%s", out)
	}

	// A SQL error shows the SQL.
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"archive", "query", "SELECT pollId FROM votes", "-state-dir", state}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "SELECT pollId FROM votes") {
		t.Errorf("bad SQL: %v, want an error showing the SQL", err)
	}
	err = run(ctx, []string{"archive", "query", "SELECT 1", "-table", "objects", "-state-dir", state}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `"objects" (the archive holds ddbpipe-votes (view votes))`) {
		t.Errorf("unknown table: %v", err)
	}
	var rows []map[string]any
	out, _ = cli("archive", "query", "SELECT count(*) AS n FROM archive", "-month", "2026-11", "-format", "json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0]["n"] != float64(60) {
		t.Errorf("count: %s (%v)", out, err)
	}
	// No row: an empty array in json, nothing in jsonl.
	for format, want := range map[string]string{"json": "[]\n", "jsonl": ""} {
		if out, _ := cli("archive", "query", "-named", "voter-history", "-arg", "2026-11", "-arg", "nobody", "-format", format); out != want {
			t.Errorf("voter-history of nobody, -format %s: %q, want %q", format, out, want)
		}
	}
}

func cliVote(i int, poll, voter string, at time.Time) events.DynamoDBEventRecord {
	s := events.NewStringAttribute
	pk, sk := fmt.Sprintf("%s#%d", poll, i%4), fmt.Sprintf("%s#v%d", voter, i)
	return events.DynamoDBEventRecord{
		EventName: "INSERT", EventID: fmt.Sprintf("e%d", i),
		EventSourceArn: "arn:aws:dynamodb:us-east-1:000000000000:table/ddbpipe-votes-2026-11/stream/2026-11-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: at},
			SequenceNumber:              fmt.Sprint(1000 + i),
			Keys:                        map[string]events.DynamoDBAttributeValue{"pk": s(pk), "sk": s(sk)},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"pk": s(pk), "sk": s(sk), "pollId": s(poll), "optionId": s("red"), "voterId": s(voter), "voteId": s(fmt.Sprintf("v%d", i)),
				"castAt": s(at.UTC().Format(time.RFC3339Nano)),
			},
		},
	}
}
