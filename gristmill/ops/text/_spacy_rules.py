"""The data of the spaCy-style English tokenizer: its special cases (contractions, abbreviations,
emoticons...) and units, generated from the rules of spaCy's English exceptions."""
from __future__ import annotations

from functools import lru_cache


# n't verbs (stem before "n't"); those in _NT_VE also take "n't've"
_NT_VERBS = ["do", "does", "did", "is", "are", "was", "were", "has", "have", "had", "could", "would", "should",
             "must", "might", "need", "dare", "may", "ought", "ai", "ca", "wo", "sha"]
_NT_VE = {"do", "does", "did", "had", "could", "would", "should", "must", "might", "need", "may", "ought", "ca",
          "wo", "sha"}
# pronoun -> contractions it takes (besides 'd, 'll, 'd've, 'll've, which all take)
_PRONOUNS = {"i": ("m", "ve"), "you": ("re", "ve"), "we": ("re", "ve"), "they": ("re", "ve"),
             "these": ("re", "ve"), "those": ("re", "ve"), "he": ("s",), "she": ("s",), "it": ("s",),
             "that": ("s",), "this": ("s",)}
_PRONOUNS.update({w: ("re", "s", "ve") for w in ("there", "who", "what", "when", "where", "why", "how")})
# apostrophe-less spellings that are ordinary words, so not split ("hell", "well", "its", ...)
_NO_APO_SKIP = {"ill", "hell", "shell", "shed", "well", "were", "its", "whore", "howdy"}
_DROPPED_G = ["doin", "goin", "havin", "lovin", "nothin", "nuthin", "somethin"]
_WHOLE = ("'em 'cause 'cos 'coz 'cuz 'bout 'nuff em ll nuff ol' ma'am o'clock ' '' ’’ \\\") \\n \\t — \xa0 "
          "<space>").split()
_ABBREVIATIONS = ("Adm. Ak. Ala. Apr. Ariz. Ark. Aug. Bros. Calif. Co. Colo. Conn. Corp. D.C. Dec. Del. Dr. E.G. E.g. "
                  "Feb. Fla. Ga. Gen. Gov. I.E. I.e. Ia. Id. Ill. Inc. Ind. Jan. Jr. Jul. Jun. Kan. Kans. Ky. La. "
                  "Ltd. Mar. Mass. Md. Messrs. Mich. Minn. Miss. Mo. Mont. Mr. Mrs. Ms. Mt. N.C. N.D. N.H. N.J. "
                  "N.M. N.Y. Neb. Nebr. Nev. Nov. Oct. Okla. Ore. Pa. Ph.D. Prof. Rep. Rev. S.C. Sen. Sep. Sept. "
                  "St. Tenn. Va. Wash. Wis. a.m. p.m. co. e.g. i.e. vs. v.s. ä. ö. ü. C++ and/or w/o")
# emoticons kept as one token
_EMOTICONS = (":) :( :-) :-( ;) ;-) :D :P :p :/ :-/ :o :O :| :-| <3 </3 (: ): =) =( :] :') :'( :’( :’) :’-( :’-) -_- ^_^ "
              "o_o O_O o.O O.o o.o 0.0 xD XD [: :] (= [= =] ]= 8) 8-) (-: )-: [-: :-] (; :} :-} :> :-> :3 :x :X "
              ":* :-* :0 :-0 :-o :-O :-P :-p :-D ;D ;-D =/ =| =D =3 =[ :(( :)) :-)) :-(( (-8 (-; >:( >:o <33 :1 "
              ":'-) :'-( ^__^ -__- o_0 0_o 0_0 V_V v_v (*_*) (-_-) (._.) (>_<) (^_^) (o: (¬_¬) (ಠ_ಠ) "
              "(╯°□°）╯︵┻━┻ ._. 0.o 8-D 8D :((( :() :))) :-((( :-))) :-3 :-X :-x :o) ;_; <.< <333 >.< >.> "
              "><(((*> @_@ O.O O_o V.V XDD ^___^ o.0 o_O v.v xDD ¯\\(ツ)/¯ ಠ_ಠ ಠ︵ಠ").split()


def _variants(word: str):
    yield word
    yield word[:1].upper() + word[1:]


@lru_cache(maxsize=1)
def special_cases() -> dict[str, tuple[int, ...]]:
    """Special-cased chunks: text -> split points (code-point offsets; empty tuple = keep whole).

    Generated from the rules of spaCy's English exceptions: n't verbs, pronoun contractions (with ' or ’,
    and without an apostrophe unless that spells an ordinary word), clock times, dropped-g words,
    abbreviations and emoticons."""
    out: dict[str, tuple[int, ...]] = {}

    def add(word, *parts):
        cuts, p = [], 0
        for x in parts[:-1]:
            p += len(x)
            cuts.append(p)
        for w in _variants(word):
            out[w] = tuple(cuts)

    for apo in ("'", "’", ""):
        for v in _NT_VERBS:
            add(v + "n" + apo + "t", v, "n" + apo + "t")
            if v in _NT_VE:
                add(v + "n" + apo + "t" + apo + "ve", v, "n" + apo + "t", apo + "ve")
        for p, extra in _PRONOUNS.items():
            forms = [("d",), ("ll",), ("d", "ve"), ("ll", "ve")] + [(c,) for c in extra]
            if p == "i":
                forms.append(("m", "a"))
            if p == "how":
                forms.append(("d", "y"))
            for parts in forms:
                pieces = [apo + parts[0]] + [(apo if c != "a" else "") + c for c in parts[1:]]
                word = p + "".join(pieces)
                if not apo and (word in _NO_APO_SKIP or (p, parts) in (("she", ("d",)), ("we", ("re",)),
                                                                       ("who", ("re",)), ("he", ("ll",)))):
                    continue
                add(word, p, *pieces)
        for m in ("could", "might", "must", "should", "would", "not"):
            add(m + apo + "ve", m, apo + "ve")
        if apo:
            for c in ("d", "ll", "re", "s", "S", "em", "cause", "Cause", "cos", "Cos", "coz", "Coz", "cuz", "Cuz",
                      "bout", "nuff"):
                out[apo + c] = ()
            for g in _DROPPED_G:
                add(g + apo)
            add("c" + apo + "mon", "c" + apo + "m", "on")
            add("ma" + apo + "am")
            add("o" + apo + "clock")
            add("ol" + apo)
            out["y" + apo + "all"] = (2,)
            add("let" + apo + "s", "let", apo + "s")
    out["‘S"] = out["‘s"] = out["’"] = ()
    for g in _DROPPED_G + ["ol"]:
        add(g)
    for w, a_, b_ in (("cannot", "can", "not"), ("gonna", "gon", "na"), ("gotta", "got", "ta")):
        add(w, a_, b_)
    out["yall"] = (1,)
    for h in range(1, 13):
        for m in ("am", "pm", "a.m.", "p.m."):
            out[f"{h}{m}"] = (len(str(h)),)
    for u in "CFKcfk":
        out[f"°{u}."] = (1, 2)
    for w in _WHOLE + _ABBREVIATIONS.split() + [f"{c}." for c in "abcdefghijklmnopqrstuvwxyz"] + _EMOTICONS:
        out[w] = ()
    return out



UNITS = ["km", "km²", "km³", "m", "m²", "m³", "dm", "dm²", "dm³", "cm", "cm²", "cm³", "mm", "mm²", "mm³", "ha", "µm",
          "nm", "yd", "in", "ft", "kg", "g", "mg", "µg", "t", "lb", "oz", "m/s", "km/h", "kmh", "mph", "hPa", "Pa",
          "mbar", "mb", "MB", "kb", "KB", "gb", "GB", "tb", "TB", "T", "G", "M", "K", "%"]
