// Package session holds each session's state document and the patches
// that change it.
//
// A session's state is one JSON object in the KV bucket planbus-sessions,
// under the session id. Tool results may carry a statePatch (the built-in
// remember skill's is its input); dispatchers apply it with Store.Patch,
// and planners read the state as the world they plan from (the HTN
// planner's facts, the GOAP planner's start state, the document an
// external planner is given). planbus.session.reset with "state": true
// deletes it (Store.Delete).
//
// A patch is a deep merge (Merge, MergeJSON): a null deletes its key,
// objects merge member by member, arrays and other values replace what was
// there. Merging the same patch twice gives the same document, so a result
// delivered again does no harm. Store.Patch writes with compare-and-set on
// the entry's revision and retries on a conflict, so concurrent patches of
// one session never lose an update. A Store is safe for concurrent use.
package session
