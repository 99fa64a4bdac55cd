package client

import "github.com/burstcache/burstcache/cacheserver/namespace"

func namespaceSize(size int64) namespace.SetAttr { return namespace.SetAttr{Size: &size} }

// closeOnce closes f unless the test closed it already.
func (f *FS) closeOnce() {
	select {
	case <-f.stop:
	default:
		f.Close()
	}
}
