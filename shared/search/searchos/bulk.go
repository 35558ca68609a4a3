package searchos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/ddbpipe/ddbpipe/shared/search"
)

// Bulk writes ops to every index target names (an alias: each index it
// points at; otherwise the index itself) in one bulk request, each at its
// external version, and returns one outcome per op: the least settled of
// its outcomes in each index.
func (e *Engine) Bulk(ctx context.Context, target string, ops []search.Op) ([]search.Outcome, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	indexes, err := e.indexesOf(ctx, target)
	if err != nil {
		return nil, err
	}
	body, err := bulkBody(ops, indexes)
	if err != nil {
		return nil, err
	}
	resp, err := e.c.Bulk(ctx, opensearchapi.BulkReq{Body: bytes.NewReader(body)})
	if err != nil {
		return nil, classify("bulk", responseOf(resp), err)
	}
	if len(resp.Items) != len(ops)*len(indexes) {
		return nil, fmt.Errorf("searchos: bulk: %w: %d items answered for %d sent", search.ErrUnavailable, len(resp.Items), len(ops)*len(indexes))
	}
	out := make([]search.Outcome, len(ops))
	for i, op := range ops {
		for j := range indexes {
			o := outcomeOf(resp.Items[i*len(indexes)+j])
			if j == 0 || rank(o, op) > rank(out[i], op) {
				out[i] = o
			}
		}
	}
	return out, nil
}

// bulkBody is the NDJSON of ops, each written to every index.
func bulkBody(ops []search.Op, indexes []string) ([]byte, error) {
	type meta struct {
		Index       string `json:"_index"`
		ID          string `json:"_id"`
		Version     int64  `json:"version"`
		VersionType string `json:"version_type"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, op := range ops {
		for _, index := range indexes {
			m := meta{Index: index, ID: op.ID, Version: op.Version, VersionType: "external"}
			action := map[string]meta{"index": m}
			if op.Delete {
				action = map[string]meta{"delete": m}
			}
			if err := enc.Encode(action); err != nil {
				return nil, fmt.Errorf("searchos: bulk action: %w", err)
			}
			if op.Delete {
				continue
			}
			if err := enc.Encode(sourceOf(op.Doc)); err != nil {
				return nil, fmt.Errorf("searchos: document %q: %w", op.Doc.Key, err)
			}
		}
	}
	return b.Bytes(), nil
}

func outcomeOf(item map[string]opensearchapi.BulkRespItem) search.Outcome {
	for _, it := range item { // one action per item
		o := search.Outcome{Status: it.Status}
		if it.Error != nil {
			o.Type, o.Reason = it.Error.Type, it.Error.Reason
		}
		return o
	}
	return search.Outcome{}
}

// rank orders outcomes from the most settled (the index is newer) to the
// least (retry): an op is as settled as its least settled index.
func rank(o search.Outcome, op search.Op) int {
	return slices.Index([]search.Class{search.Newer, search.Done, search.Rejected, search.Retry}, o.Class(op))
}
