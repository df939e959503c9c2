// The floor under haul's transport: the least a program can do with URLSession on Linux, to
// tell URLSession's own cost from haul's. Built and run by Benchmarks/run.
//
//   urlsession-floor URL OUTPUT          one URL streamed to a file (workload B)
//   urlsession-floor --fsync URL OUTPUT  the same, then fsync(2) before closing: the floor of a
//                                        downloader that makes its file durable (as haul does)
//   urlsession-floor -i LIST FOLDER N    every URL of LIST into FOLDER, N at a time (workload A)
//
// One session, one serial delegate queue, a data-task delegate that write(2)s each chunk; no
// database, no temp file, no checks, and no fsync unless asked.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

final class Writer: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked Sendable: every field below is used only on the session's serial delegate
    // queue (the first tasks are started from an operation on that queue too).
    var session: URLSession!
    var urls: [URL] = []
    var folder = ""
    var parallel = 1
    var next = 0
    var finished = 0
    var files: [Int: Int32] = [:]
    var durable = false
    let done = DispatchSemaphore(value: 0)

    /// Starts tasks until `parallel` are running or the list is done.
    func startMore() {
        while next < urls.count && next - finished < parallel {
            let url = urls[next]
            next += 1
            start(url, into: folder + "/" + url.lastPathComponent)
        }
    }

    func start(_ url: URL, into path: String) {
        var request = URLRequest(url: url)
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        let task = session.dataTask(with: request)
        files[task.taskIdentifier] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        task.resume()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let fd = files[dataTask.taskIdentifier] else { return }
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let error { FileHandle.standardError.write(Data("error: \(error)\n".utf8)) }
        if let fd = files.removeValue(forKey: task.taskIdentifier) {
            if durable && fsync(fd) != 0 { FileHandle.standardError.write(Data("error: fsync failed\n".utf8)) }
            close(fd)
        }
        finished += 1
        if finished >= max(1, urls.count) { done.signal() } else { startMore() }
    }
}

let arguments = CommandLine.arguments
let writer = Writer()
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 1
let configuration = URLSessionConfiguration.ephemeral
configuration.httpCookieAcceptPolicy = .never
configuration.httpCookieStorage = nil
configuration.urlCache = nil
if arguments.count == 5, arguments[1] == "-i", let parallel = Int(arguments[4]), parallel > 0,
   let list = try? String(contentsOfFile: arguments[2], encoding: .utf8) {
    writer.urls = list.split(separator: "\n").compactMap { URL(string: String($0)) }
    writer.folder = arguments[3]
    writer.parallel = parallel
    configuration.httpMaximumConnectionsPerHost = parallel
    writer.session = URLSession(configuration: configuration, delegate: writer, delegateQueue: queue)
    queue.addOperation { writer.startMore() }
} else if arguments.count == 3 || (arguments.count == 4 && arguments[1] == "--fsync"),
          let url = URL(string: arguments[arguments.count - 2]) {
    let output = arguments[arguments.count - 1]
    writer.durable = arguments.count == 4
    writer.urls = [url]
    writer.session = URLSession(configuration: configuration, delegate: writer, delegateQueue: queue)
    queue.addOperation { writer.start(url, into: output) }
} else {
    FileHandle.standardError.write(Data("usage: urlsession-floor [--fsync] URL OUTPUT | urlsession-floor -i LIST FOLDER N\n".utf8))
    exit(64)
}
writer.done.wait()
