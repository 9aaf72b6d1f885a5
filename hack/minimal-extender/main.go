// Command minimal-extender is a kube-scheduler extender that does only what the
// protocol itself requires in names-only mode (nodeCacheCapable: true): read each
// request's NodeNames, let every node pass /filter, and give every node score 0 at
// /prioritize. bench/scheduling.py runs it beside loadsched's extender, so the cost
// of the extender protocol to kube-scheduler (encoding, HTTP, decoding, in its
// sequential scheduling cycle) is measured apart from the cost of loadsched's
// decisions.
//
// Usage: minimal-extender 127.0.0.1:PORT
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"strconv"
)

// args is the part of k8s.io/kube-scheduler/extender/v1 ExtenderArgs read here.
type args struct {
	NodeNames *[]string
}

type filterResult struct {
	NodeNames                  *[]string
	FailedNodes                map[string]string
	FailedAndUnresolvableNodes map[string]string
	Error                      string
}

type hostPriority struct {
	Host  string
	Score int64
}

func decode(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	var a args
	if err := json.NewDecoder(r.Body).Decode(&a); err != nil || a.NodeNames == nil {
		http.Error(w, "names-only request expected", http.StatusBadRequest)
		return nil, false
	}
	return *a.NodeNames, true
}

func reply(w http.ResponseWriter, value any) {
	body, err := json.Marshal(value)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: minimal-extender HOST:PORT")
	}
	empty := map[string]string{}
	http.HandleFunc("POST /filter", func(w http.ResponseWriter, r *http.Request) {
		if names, ok := decode(w, r); ok {
			reply(w, filterResult{NodeNames: &names, FailedNodes: empty, FailedAndUnresolvableNodes: empty})
		}
	})
	http.HandleFunc("POST /prioritize", func(w http.ResponseWriter, r *http.Request) {
		if names, ok := decode(w, r); ok {
			scores := make([]hostPriority, len(names))
			for i, name := range names {
				scores[i] = hostPriority{Host: name}
			}
			reply(w, scores)
		}
	})
	http.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	log.Fatal(http.ListenAndServe(os.Args[1], nil))
}
