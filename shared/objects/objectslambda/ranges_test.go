package objectslambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsapi"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// rangeGet sends a GET with a Range header through the API (signed, no
// redirect followed) and returns the answer.
func rangeGet(t *testing.T, hc *http.Client, url, rng string) (status int, header http.Header, body []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// Ranges of every placement through the local API: 206 with the bytes and
// Content-Range, from the Go client and from a plain signed request.
func TestRangesByPlacement(t *testing.T) {
	e, c := newClient(t)
	ctx := context.Background()
	hc := e.APIClient()
	tests := []struct {
		name string
		body []byte
		keep bool
		kind string
	}{
		{"inline", objectstest.Random(2*objectstest.KB, 21), false, "inline"},
		{"compressed", objectstest.Text(8 * objectstest.KB), false, "compressed"},
		{"chunked", objectstest.Random(objectstest.MB+100, 22), true, "chunked"},
		{"in S3, served here", objectstest.Random(300*objectstest.KB, 23), false, "s3"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("ranges/%d/doc.bin", i)
			m, err := c.Put(ctx, key, tt.body, objectsclient.PutOptions{KeepInTable: tt.keep})
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tt.kind {
				t.Fatalf("stored %s, want %s", m.Kind, tt.kind)
			}
			size := int64(len(tt.body))
			chunk := int64(objects.DefaultChunkSize)
			for _, r := range []struct {
				off, n   int64
				from, to int64 // the bytes wanted
			}{
				{0, 1, 0, 1},
				{size - 1, 1, size - 1, size},
				{100, 1024, 100, 1124},
				{min(chunk-512, size-1024), 1024, min(chunk-512, size-1024), min(chunk+512, size)}, // across a chunk boundary when chunked
				{size / 2, objectsclient.ToEnd, size / 2, size},
				{-10, objectsclient.ToEnd, size - 10, size},
				{size - 5, 100, size - 5, size}, // past the end: cut there
			} {
				p, err := c.GetRange(ctx, key, 0, r.off, r.n)
				if err != nil {
					t.Fatalf("GetRange(%d, %d): %v", r.off, r.n, err)
				}
				if p.Off != r.from || !bytes.Equal(p.Body, tt.body[r.from:r.to]) || p.Size != size || p.Version != 1 {
					t.Errorf("GetRange(%d, %d): %d bytes from %d of %d (v%d); want bytes %d-%d of %d, v1", r.off, r.n, len(p.Body), p.Off, p.Size, p.Version, r.from, r.to-1, size)
				}
			}
			status, h, body := rangeGet(t, hc, e.APIURL+"/objects/"+key, "bytes=10-19")
			if status != http.StatusPartialContent || h.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", size) || !bytes.Equal(body, tt.body[10:20]) ||
				h.Get("ETag") != `"1"` || h.Get("Accept-Ranges") != "bytes" || h.Get("X-Object-Size") != fmt.Sprint(size) {
				t.Errorf("bytes=10-19: %d, %v, %d bytes", status, h, len(body))
			}
			status, h, body = rangeGet(t, hc, e.APIURL+"/objects/"+key, fmt.Sprintf("bytes=%d-", size))
			var eb apigw.ErrorBody
			if status != http.StatusRequestedRangeNotSatisfiable || h.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) ||
				json.Unmarshal(body, &eb) != nil || eb.Error != objectsapi.ReasonRangeNotSatisfiable {
				t.Errorf("past the end: %d, Content-Range %q, %s", status, h.Get("Content-Range"), body)
			}
		})
	}
}

// A chunked document with a damaged chunk and a missing one: a range over
// the damaged one is refused (the chunk's digest), ranges elsewhere are
// served, so neither of those chunks was read for them.
func TestRangeChunkDamage(t *testing.T) {
	e, c := newClient(t)
	ctx := context.Background()
	key := "ranges/damaged.bin"
	body := objectstest.Random(4*objects.DefaultChunkSize, 31) // 4 chunks
	if _, err := c.Put(ctx, key, body, objectsclient.PutOptions{KeepInTable: true}); err != nil {
		t.Fatal(err)
	}
	table := e.Vars["OBJECTS_TABLE_NAME"]
	db := awsenv.DynamoDB(e.AWS)
	rec, ok, err := objectsddb.New(db, table).Item(ctx, key, 0)
	if err != nil || !ok || rec.Manifest == nil || !rec.Manifest.HasSums() || rec.Manifest.Count != 4 {
		t.Fatalf("v0 %+v, %t, %v: want a manifest of 4 chunks with their digests", rec.Manifest, ok, err)
	}
	m := *rec.Manifest
	damaged := bytes.Clone(body[objects.DefaultChunkSize : 2*objects.DefaultChunkSize])
	damaged[100] ^= 1
	k1, k3 := m.ChunkKey(key, 1), m.ChunkKey(key, 3)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: k1.PK}, "sk": &types.AttributeValueMemberS{Value: k1.SK}, "data": &types.AttributeValueMemberB{Value: damaged},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: k3.PK}, "sk": &types.AttributeValueMemberS{Value: k3.SK},
	}}); err != nil {
		t.Fatal(err)
	}
	cs := int64(objects.DefaultChunkSize)
	for _, r := range []struct {
		name   string
		off, n int64
		status int
	}{
		{"chunk 0", 0, 1024, http.StatusPartialContent},
		{"chunk 2", 2*cs + 7, 1024, http.StatusPartialContent},
		{"chunk 0 to its end", cs - 1024, 1024, http.StatusPartialContent},
		{"chunk 1", cs + 50, 100, http.StatusInternalServerError},
		{"across chunks 0 and 1", cs - 10, 20, http.StatusInternalServerError},
	} {
		p, err := c.GetRange(ctx, key, 0, r.off, r.n)
		var ae *apigw.Error
		switch {
		case r.status == http.StatusPartialContent && (err != nil || !bytes.Equal(p.Body, body[r.off:r.off+r.n])):
			t.Errorf("%s: %d bytes, %v; want the document's bytes", r.name, len(p.Body), err)
		case r.status != http.StatusPartialContent && (!errors.As(err, &ae) || ae.Status != r.status || ae.ErrorBody.Error != objectsapi.ReasonChecksum):
			t.Errorf("%s: %v; want %d %s", r.name, err, r.status, objectsapi.ReasonChecksum)
		}
	}
	if _, err := c.Get(ctx, key, 0); err == nil {
		t.Error("a whole GET of the damaged document succeeded")
	}
}

// A document in S3 over the response limit answers a ranged GET with 303;
// the same Range sent to the presigned URL gets S3's own 206. The Go client
// does that; an unsatisfiable range is refused before any redirect.
func TestRangeThroughS3Redirect(t *testing.T) {
	e, c := newClient(t)
	ctx := context.Background()
	key := "ranges/big.bin"
	body := objectstest.Random(5*objectstest.MB, 41)
	if _, err := c.Upload(ctx, key, bytes.NewReader(body), int64(len(body)), objectsclient.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	size := int64(len(body))
	hc := e.APIClient()
	status, h, raw := rangeGet(t, hc, e.APIURL+"/objects/"+key, "bytes=1048576-1049599")
	if status != http.StatusSeeOther || h.Get("Location") == "" || h.Get("X-Object-Kind") != "s3" {
		t.Fatalf("ranged GET of a 5 MB document in S3: %d %s, Location %q; want 303", status, raw, h.Get("Location"))
	}
	plain := &http.Client{} // a presigned URL is sent unsigned
	status, sh, part := rangeGet(t, plain, h.Get("Location"), "bytes=1048576-1049599")
	if status != http.StatusPartialContent || sh.Get("Content-Range") != fmt.Sprintf("bytes 1048576-1049599/%d", size) || !bytes.Equal(part, body[1<<20:1<<20+1024]) {
		t.Errorf("the presigned URL with the Range: %d, Content-Range %q, %d bytes; want S3's 206", status, sh.Get("Content-Range"), len(part))
	}
	for _, r := range []struct{ off, n, from, to int64 }{
		{1 << 20, 1024, 1 << 20, 1<<20 + 1024},
		{-100, objectsclient.ToEnd, size - 100, size},
		{size - 10, objectsclient.ToEnd, size - 10, size},
	} {
		p, err := c.GetRange(ctx, key, 0, r.off, r.n)
		if err != nil || p.Off != r.from || !bytes.Equal(p.Body, body[r.from:r.to]) || p.Size != size || p.Version != 1 {
			t.Errorf("GetRange(%d, %d): %d bytes from %d of %d, %v; want bytes %d-%d", r.off, r.n, len(p.Body), p.Off, p.Size, err, r.from, r.to-1)
		}
	}
	status, h, _ = rangeGet(t, hc, e.APIURL+"/objects/"+key, fmt.Sprintf("bytes=%d-", size+1))
	if status != http.StatusRequestedRangeNotSatisfiable || h.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
		t.Errorf("past the end of a big S3 document: %d, Content-Range %q; want 416 before any redirect", status, h.Get("Content-Range"))
	}
}
