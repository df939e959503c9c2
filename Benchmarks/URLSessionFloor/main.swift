// The floor under haul's transport: the least a program can do to stream one URL to a file with
// URLSession on Linux (one session, a data-task delegate writing each chunk with write(2)).
// Built and run by Benchmarks/run to tell URLSession's own cost from haul's.
//
//   swiftc -O main.swift -o urlsession-floor && ./urlsession-floor URL OUTPUT
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

final class Writer: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked Sendable: `fd` is set before the task starts and only used on the session's
    // serial delegate queue afterwards.
    let fd: Int32
    let done = DispatchSemaphore(value: 0)
    init(fd: Int32) { self.fd = fd }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
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
        done.signal()
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: urlsession-floor URL OUTPUT\n".utf8))
    exit(64)
}
let fd = open(arguments[2], O_WRONLY | O_CREAT | O_TRUNC, 0o644)
let writer = Writer(fd: fd)
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 1
let session = URLSession(configuration: .ephemeral, delegate: writer, delegateQueue: queue)
var request = URLRequest(url: url)
request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
session.dataTask(with: request).resume()
writer.done.wait()
close(fd)
