// Command patchfloor sends node merge-patches to the API server with the least client work
// that can send them, as the floor bench/annotator.py measures the annotator's round against.
//
// It reads one patch per line from -bodies ("<node>\t<JSON merge patch>"), opens -concurrency
// connections (HTTP/1.1, one per worker, as the annotator does) or one HTTP/2 connection with
// -http2, warms them with a GET /version each, then times -concurrency workers sending every
// patch as PATCH /api/v1/nodes/<node> (application/merge-patch+json) and reading each answer
// to its end without decoding it. Credentials and TLS come from -kubeconfig through client-go's
// transport. It prints one JSON line: {"seconds": ..., "patches": ..., "failed": ..., ...}.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type patch struct {
	node string
	body []byte
}

type result struct {
	Seconds     float64        `json:"seconds"`
	Patches     int            `json:"patches"`
	Failed      int64          `json:"failed"`
	Statuses    map[string]int `json:"statuses"`
	Concurrency int            `json:"concurrency"`
	Protocol    string         `json:"protocol"`
	FirstError  string         `json:"first_error,omitempty"`
}

func readPatches(path string) ([]patch, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []patch
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; scanner.Scan(); line++ {
		node, body, ok := strings.Cut(scanner.Text(), "\t")
		if !ok || node == "" || body == "" {
			return nil, fmt.Errorf("%s:%d: want <node>\\t<body>", path, line)
		}
		out = append(out, patch{node, []byte(body)})
	}
	return out, scanner.Err()
}

func client(kubeconfig string, http2 bool, conns int) (*http.Client, string, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, "", err
	}
	if !http2 {
		// client-go negotiates HTTP/2 unless the TLS config offers only HTTP/1.1.
		config.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	transport, err := rest.TransportFor(config)
	if err != nil {
		return nil, "", err
	}
	if t, ok := transport.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = conns
	}
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}, strings.TrimRight(config.Host, "/"), nil
}

func send(c *http.Client, method, url string, body []byte) (int, error) {
	request, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		request.Header.Set("Content-Type", "application/merge-patch+json")
	}
	request.Header.Set("Accept", "application/json")
	response, err := c.Do(request)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, response.Body)
	response.Body.Close()
	return response.StatusCode, err
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (credentials and TLS)")
	bodies := flag.String("bodies", "", "file of <node>\\t<JSON merge patch> lines")
	concurrency := flag.Int("concurrency", 8, "patches in flight")
	http2 := flag.Bool("http2", false, "one multiplexed HTTP/2 connection instead of HTTP/1.1 per worker")
	flag.Parse()
	if *kubeconfig == "" || *bodies == "" || *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "patchfloor: -kubeconfig and -bodies are required, -concurrency ≥ 1")
		os.Exit(2)
	}
	patches, err := readPatches(*bodies)
	if err != nil {
		fmt.Fprintln(os.Stderr, "patchfloor:", err)
		os.Exit(2)
	}
	c, host, err := client(*kubeconfig, *http2, *concurrency)
	if err != nil {
		fmt.Fprintln(os.Stderr, "patchfloor: kubeconfig:", err)
		os.Exit(2)
	}

	var warm sync.WaitGroup
	for range *concurrency {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if _, err := send(c, http.MethodGet, host+"/version", nil); err != nil {
				fmt.Fprintln(os.Stderr, "patchfloor: warm-up:", err)
				os.Exit(1)
			}
		}()
	}
	warm.Wait()

	var (
		next     atomic.Int64
		failed   atomic.Int64
		mu       sync.Mutex
		statuses = map[string]int{}
		first    string
		workers  sync.WaitGroup
	)
	started := time.Now()
	for range *concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			local := map[string]int{}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(patches) {
					break
				}
				p := patches[i]
				code, err := send(c, http.MethodPatch, host+"/api/v1/nodes/"+p.node, p.body)
				local[fmt.Sprint(code)]++
				if err != nil || code != http.StatusOK {
					failed.Add(1)
					mu.Lock()
					if first == "" {
						first = fmt.Sprintf("node/%s: %d %v", p.node, code, err)
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			for k, v := range local {
				statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	workers.Wait()
	elapsed := time.Since(started)
	protocol := "HTTP/1.1"
	if *http2 {
		protocol = "HTTP/2"
	}
	out, _ := json.Marshal(result{
		Seconds: elapsed.Seconds(), Patches: len(patches), Failed: failed.Load(),
		Statuses: statuses, Concurrency: *concurrency, Protocol: protocol, FirstError: first,
	})
	fmt.Println(string(out))
}
