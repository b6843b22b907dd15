;; The template lane: reads a run of server-sent events that all follow one template
;; (fixed bytes, a JSON string's content, fixed bytes) straight off a chunk of bytes,
;; comparing the fixed bytes 16 at a time and copying each event's text out.
;;
;; This file is the source of the bytes in template-lane.ts. After changing it, run
;; `npm run build:lane`; a test compiles this file again and fails when the two differ.

(module
  (memory (export "memory") 1)
  (global $written (export "written") (mut i32) (i32.const 0))
  (global $flags (export "flags") (mut i32) (i32.const 0))

  ;; Whether the n bytes at a and b are equal: 16 at a time, the last 16 overlapping.
  (func $eq (param $a i32) (param $b i32) (param $n i32) (result i32)
    (local $i i32) (local $acc v128)
    (if (i32.lt_u (local.get $n) (i32.const 16))
      (then
        (block $done
          (loop $bytes
            (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
            (if (i32.ne (i32.load8_u (i32.add (local.get $a) (local.get $i)))
                        (i32.load8_u (i32.add (local.get $b) (local.get $i))))
              (then (return (i32.const 0))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $bytes)))
        (return (i32.const 1))))
    (local.set $acc
      (v128.xor (v128.load (i32.sub (i32.add (local.get $a) (local.get $n)) (i32.const 16)))
                (v128.load (i32.sub (i32.add (local.get $b) (local.get $n)) (i32.const 16)))))
    (block $done
      (loop $blocks
        (br_if $done (i32.gt_u (i32.add (local.get $i) (i32.const 16)) (local.get $n)))
        (local.set $acc
          (v128.or (local.get $acc)
            (v128.xor (v128.load (i32.add (local.get $a) (local.get $i)))
                      (v128.load (i32.add (local.get $b) (local.get $i))))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $blocks)))
    (i32.eqz (v128.any_true (local.get $acc))))

  ;; Reads events `lead` + text + `tail` from p while they come whole before end. In
  ;; memory, `lead` (L bytes) is followed by `tail` (F bytes) and by `lead` again, so a
  ;; tail and the next event's lead are compared at once. A text's bytes go to out.
  ;; Returns where the run ends; $written: the text bytes kept; $flags: 1 if a kept
  ;; text holds an escape, 2 if a byte above 0x7f.
  (func (export "scan") (param $p i32) (param $end i32) (param $lead i32) (param $L i32)
        (param $F i32) (param $out i32) (result i32)
    (local $q i32) (local $o i32) (local $b i32) (local $kept i32) (local $flags i32)
    (local $seen i32) (local $need i32) (local $v v128) (local $mask i32) (local $k i32)
    (local $tail i32)
    (local.set $tail (i32.add (local.get $lead) (local.get $L)))
    (local.set $o (local.get $out))
    (local.set $kept (local.get $out))
    (block $stop
      (br_if $stop (i32.gt_u (i32.add (i32.add (local.get $p) (local.get $L)) (local.get $F)) (local.get $end)))
      (br_if $stop (i32.eqz (call $eq (local.get $p) (local.get $lead) (local.get $L))))
      (local.set $q (i32.add (local.get $p) (local.get $L)))
      (loop $event
        (local.set $need (i32.const 0))
        (block $closed
          (loop $text
            ;; 16 bytes at a time while they lie before end: plain ASCII text is stored as is
            (if (i32.le_u (i32.add (local.get $q) (i32.const 16)) (local.get $end))
              (then
                (local.set $v (v128.load (local.get $q)))
                (local.set $mask
                  (i8x16.bitmask
                    (v128.or
                      (v128.or (i8x16.eq (local.get $v) (i8x16.splat (i32.const 34)))
                               (i8x16.eq (local.get $v) (i8x16.splat (i32.const 92))))
                      (v128.or (i8x16.lt_u (local.get $v) (i8x16.splat (i32.const 32)))
                               (i8x16.lt_s (local.get $v) (i8x16.splat (i32.const 0)))))))
                (v128.store (local.get $o) (local.get $v))
                (local.set $k (select (i32.ctz (local.get $mask)) (i32.const 16) (local.get $mask)))
                (if (local.get $k)
                  (then
                    (br_if $stop (local.get $need))
                    (local.set $o (i32.add (local.get $o) (local.get $k)))
                    (local.set $q (i32.add (local.get $q) (local.get $k)))
                    (br_if $text (i32.eq (local.get $k) (i32.const 16)))))))
            (br_if $stop (i32.ge_u (local.get $q) (local.get $end)))
            (local.set $b (i32.load8_u (local.get $q)))
            (if (i32.ge_u (local.get $b) (i32.const 128))
              (then
                (local.set $seen (i32.or (local.get $seen) (i32.const 2)))
                (if (i32.lt_u (local.get $b) (i32.const 192))
                  (then
                    (br_if $stop (i32.eqz (local.get $need)))
                    (local.set $need (i32.sub (local.get $need) (i32.const 1))))
                  (else
                    (br_if $stop (local.get $need))
                    (local.set $need
                      (select (i32.const 3)
                        (select (i32.const 2) (i32.const 1) (i32.ge_u (local.get $b) (i32.const 224)))
                        (i32.ge_u (local.get $b) (i32.const 240)))))))
              (else
                (br_if $stop (local.get $need))
                (br_if $closed (i32.eq (local.get $b) (i32.const 34)))
                (br_if $stop (i32.lt_u (local.get $b) (i32.const 32)))
                (if (i32.eq (local.get $b) (i32.const 92))
                  (then
                    (br_if $stop (i32.ge_u (i32.add (local.get $q) (i32.const 1)) (local.get $end)))
                    (local.set $b (i32.load8_u (i32.add (local.get $q) (i32.const 1))))
                    (local.set $seen (i32.or (local.get $seen) (i32.const 1)))
                    (if (i32.eq (local.get $b) (i32.const 117))
                      (then
                        (br_if $stop (i32.gt_u (i32.add (local.get $q) (i32.const 6)) (local.get $end)))
                        (br_if $stop (i32.eqz (call $hex (i32.add (local.get $q) (i32.const 2)))))
                        (br_if $stop (i32.eqz (call $hex (i32.add (local.get $q) (i32.const 3)))))
                        (br_if $stop (i32.eqz (call $hex (i32.add (local.get $q) (i32.const 4)))))
                        (br_if $stop (i32.eqz (call $hex (i32.add (local.get $q) (i32.const 5)))))
                        (i64.store (local.get $o) (i64.load (local.get $q)))
                        (local.set $o (i32.add (local.get $o) (i32.const 6)))
                        (local.set $q (i32.add (local.get $q) (i32.const 6)))
                        (br $text)))
                    (br_if $stop (i32.eqz (call $simple (local.get $b))))
                    (i32.store16 (local.get $o) (i32.load16_u (local.get $q)))
                    (local.set $o (i32.add (local.get $o) (i32.const 2)))
                    (local.set $q (i32.add (local.get $q) (i32.const 2)))
                    (br $text)))))
            (i32.store8 (local.get $o) (local.get $b))
            (local.set $o (i32.add (local.get $o) (i32.const 1)))
            (local.set $q (i32.add (local.get $q) (i32.const 1)))
            (br $text)))
        ;; the closing quote at q: the tail, and the next event's lead with it where it fits
        (br_if $stop (i32.gt_u (i32.add (local.get $q) (local.get $F)) (local.get $end)))
        (if (i32.le_u (i32.add (i32.add (local.get $q) (local.get $F)) (local.get $L)) (local.get $end))
          (then
            (if (call $eq (local.get $q) (local.get $tail) (i32.add (local.get $F) (local.get $L)))
              (then
                (local.set $p (i32.add (local.get $q) (local.get $F)))
                (local.set $kept (local.get $o))
                (local.set $flags (local.get $seen))
                (local.set $q (i32.add (local.get $p) (local.get $L)))
                (br $event)))))
        ;; the run ends with this event, if its tail is whole
        (br_if $stop (i32.eqz (call $eq (local.get $q) (local.get $tail) (local.get $F))))
        (local.set $p (i32.add (local.get $q) (local.get $F)))
        (local.set $kept (local.get $o))
        (local.set $flags (local.get $seen))))
    (global.set $written (i32.sub (local.get $kept) (local.get $out)))
    (global.set $flags (local.get $flags))
    (local.get $p))

  (func $hex (param $at i32) (result i32)
    (local $c i32)
    (local.set $c (i32.load8_u (local.get $at)))
    (i32.or
      (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10))
      (i32.lt_u (i32.sub (i32.or (local.get $c) (i32.const 32)) (i32.const 97)) (i32.const 6))))

  (func $simple (param $c i32) (result i32)
    (i32.or (i32.or (i32.or (i32.eq (local.get $c) (i32.const 34)) (i32.eq (local.get $c) (i32.const 92)))
                    (i32.or (i32.eq (local.get $c) (i32.const 47)) (i32.eq (local.get $c) (i32.const 98))))
            (i32.or (i32.or (i32.eq (local.get $c) (i32.const 102)) (i32.eq (local.get $c) (i32.const 110)))
                    (i32.or (i32.eq (local.get $c) (i32.const 114)) (i32.eq (local.get $c) (i32.const 116)))))))
