package searchos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/ddbpipe/ddbpipe/shared/search"
)

// firstSuffix names the index Ensure creates; a reindex names its index
// by the time it starts.
const firstSuffix = "000001"

// Ensure makes sure the aliases exist: when the search alias names no
// index, it creates <alias>-000001 and points both aliases at it. Two
// indexers ensuring at once create the one index once (the second create
// is refused as existing), and adding an alias twice changes nothing.
func (e *Engine) Ensure(ctx context.Context) error {
	indexes, err := e.aliasIndexes(ctx, e.alias)
	if err != nil || len(indexes) > 0 {
		return err
	}
	name := e.alias + "-" + firstSuffix
	if err := e.CreateIndex(ctx, name); err != nil && !strings.Contains(err.Error(), "already_exists") {
		return err
	}
	return e.updateAliases(ctx, []aliasAction{{Add: &aliasRef{Index: name, Alias: e.alias}}, {Add: &aliasRef{Index: name, Alias: e.WriteAlias()}}})
}

// CreateIndex creates an index with the documents' settings and mappings.
func (e *Engine) CreateIndex(ctx context.Context, name string) error {
	resp, err := e.c.Indices.Create(ctx, opensearchapi.IndicesCreateReq{Index: name, Body: bytes.NewReader(e.indexBody())})
	if err != nil {
		return classify("create index "+name, responseOf(resp), err)
	}
	return nil
}

// DeleteIndex deletes an index.
func (e *Engine) DeleteIndex(ctx context.Context, name string) error {
	resp, err := e.c.Indices.Delete(ctx, opensearchapi.IndicesDeleteReq{Indices: []string{name}})
	if err != nil {
		return classify("delete index "+name, responseOf(resp), err)
	}
	return nil
}

// Refresh makes every acknowledged write to index searchable.
// An engine that could not finish the refresh says so (503, 429) and is
// asked again: the reindex switches only to a refreshed index.
func (e *Engine) Refresh(ctx context.Context, index string) error {
	return again(ctx, func() error {
		resp, err := e.c.Indices.Refresh(ctx, &opensearchapi.IndicesRefreshReq{Index: []string{index}})
		if err != nil {
			return classify("refresh "+index, responseOf(resp), err)
		}
		return nil
	})
}

// Indexes returns the indexes the search alias and the write alias name.
func (e *Engine) Indexes(ctx context.Context) (read, write []string, err error) {
	if read, err = e.aliasIndexes(ctx, e.alias); err != nil {
		return nil, nil, err
	}
	if write, err = e.aliasIndexes(ctx, e.WriteAlias()); err != nil {
		return nil, nil, err
	}
	return read, write, nil
}

// AddWriteIndex has the indexer write to index too.
func (e *Engine) AddWriteIndex(ctx context.Context, index string) error {
	return e.updateAliases(ctx, []aliasAction{{Add: &aliasRef{Index: index, Alias: e.WriteAlias()}}})
}

// Switch points the search alias at to instead of from, and stops the
// writes to from, in one atomic update: a search sees one whole index or
// the other, never neither.
func (e *Engine) Switch(ctx context.Context, from []string, to string) error {
	actions := []aliasAction{{Add: &aliasRef{Index: to, Alias: e.alias}}}
	for _, f := range from {
		if f == to {
			continue
		}
		actions = append(actions,
			aliasAction{Remove: &aliasRef{Index: f, Alias: e.alias}},
			aliasAction{Remove: &aliasRef{Index: f, Alias: e.WriteAlias()}})
	}
	return e.updateAliases(ctx, actions)
}

type aliasRef struct {
	Index string `json:"index"`
	Alias string `json:"alias"`
}

type aliasAction struct {
	Add    *aliasRef `json:"add,omitempty"`
	Remove *aliasRef `json:"remove,omitempty"`
}

func (e *Engine) updateAliases(ctx context.Context, actions []aliasAction) error {
	body, err := json.Marshal(map[string][]aliasAction{"actions": actions})
	if err != nil {
		return fmt.Errorf("searchos: aliases: %w", err)
	}
	resp, err := e.c.Aliases(ctx, opensearchapi.AliasesReq{Body: bytes.NewReader(body)})
	if err != nil {
		return classify("update aliases", responseOf(resp), err)
	}
	e.mu.Lock()
	clear(e.targets)
	e.mu.Unlock()
	return nil
}

// aliasIndexes returns the indexes an alias names, sorted; none when the
// alias does not exist.
func (e *Engine) aliasIndexes(ctx context.Context, alias string) ([]string, error) {
	resp, err := e.c.Indices.Alias.Get(ctx, opensearchapi.AliasGetReq{Alias: []string{alias}})
	if err != nil {
		if statusOf(responseOf(resp), err) == 404 {
			return nil, nil
		}
		return nil, classify("get alias "+alias, responseOf(resp), err)
	}
	var out []string
	for index, a := range resp.GetIndices() {
		if _, ok := a.Aliases[alias]; ok {
			out = append(out, index)
		}
	}
	slices.Sort(out)
	return out, nil
}

// indexesOf is what a write to target reaches: the indexes of the alias
// target (cached for targetsTTL), or target itself when no alias has that
// name.
func (e *Engine) indexesOf(ctx context.Context, target string) ([]string, error) {
	e.mu.Lock()
	c, ok := e.targets[target]
	e.mu.Unlock()
	if ok && time.Since(c.at) < targetsTTL {
		return c.indexes, nil
	}
	indexes, err := e.aliasIndexes(ctx, target)
	if err != nil {
		return nil, err
	}
	if len(indexes) == 0 {
		if target == e.WriteAlias() {
			return nil, fmt.Errorf("searchos: write alias %s names no index: %w", target, search.ErrNoIndex)
		}
		indexes = []string{target}
	}
	e.mu.Lock()
	e.targets[target] = cachedTargets{indexes: indexes, at: time.Now()}
	e.mu.Unlock()
	return indexes, nil
}
