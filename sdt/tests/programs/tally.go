// Four goroutines each add up a series while allocating and dropping slices (so Go's
// collector runs, and its scheduler preempts them with SIGURG, handled on each thread's
// alternate signal stack), then main prints the total: Tally.java's counterpart.
// Built by the tests with cgo against libsdt (CGO_CFLAGS, CGO_LDFLAGS).
package main

/*
#include <sdt.h>

// SetBreakpoint is a macro: cgo calls a function.
static int mark(int id) { return SetBreakpoint(1, 1, id, 0, "phase=tally"); }
*/
import "C"

import (
	"fmt"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for k := int64(1); k <= 4; k++ {
		wg.Add(1)
		go func(n int64) {
			defer wg.Done()
			var kept [][]int64
			var sum int64
			for i := int64(0); i < 60000; i++ {
				block := make([]int64, 1000)
				block[i%1000] = i * n
				kept = append(kept, block)
				if len(kept) > 200 {
					for _, b := range kept {
						sum += b[i%1000] + b[0]
					}
					kept = nil
				}
			}
			mu.Lock()
			total += sum
			mu.Unlock()
		}(k)
	}
	C.mark(1)
	wg.Wait()
	C.mark(2)
	fmt.Println("total", total)
}
