"""The word lists and patterns token reading consults: months, titles, abbreviations, currencies,
units, Roman numerals, and the regular expressions of numeric tokens."""

from __future__ import annotations

import re

# --------------------------------------------------------------------------- tables

MONTHS = ("January February March April May June July August September October "
           "November December").split()
MONTH_NAMES = {m.lower(): m for m in MONTHS}
MONTH_ABBREV = {m[:3].lower() + ".": m for m in MONTHS if m != "May"}
MONTH_ABBREV["sept."] = "September"
_DAY_ABBREV = {d[:3].lower() + ".": d for d in
               "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()}

# Before a name; their period never ends a sentence.
TITLES = {
    "mr.": "mister", "mrs.": "missus", "ms.": "miz", "dr.": "doctor", "prof.": "professor",
    "st.": "saint", "rev.": "reverend", "gen.": "general", "capt.": "captain",
    "lt.": "lieutenant", "sgt.": "sergeant", "col.": "colonel", "gov.": "governor",
    "sen.": "senator", "rep.": "representative", "hon.": "honorable", "mt.": "mount",
}
TITLES_NO_PERIOD = {"Mr": "mister", "Mrs": "missus", "Ms": "miz", "Dr": "doctor", "St": "saint",
                     "Prof": "professor", "Mt": "mount"}
# Inside a sentence; never end one.
INLINE = {
    "e.g.": "for example", "i.e.": "that is", "vs.": "versus", "cf.": "compare",
    "approx.": "approximately", "ca.": "circa", "viz.": "namely", "dept.": "department",
}
# May end a sentence as well as abbreviate.
MAY_END = {
    "etc.": "et cetera", "jr.": "junior", "sr.": "senior", "inc.": "incorporated",
    "ltd.": "limited", "co.": "company", "corp.": "corporation", "bros.": "brothers",
    "ave.": "avenue", "blvd.": "boulevard", "rd.": "road", "hwy.": "highway",
    "a.m.": "A M", "p.m.": "P M", "al.": "al",
}
# Read so only before a number.
BEFORE_NUMBER = {"no.": "number", "p.": "page"}
STREET = {"st.": "street", "dr.": "drive", "St": "street", "Dr": "drive"}

# Abbreviations that are also everyday words ("The cat sat.", "We watched the sun.", "a sec.", "a
# fig.", "the engine's rev."): each is one only where its context makes it one, a question the
# reading (_read_word_like) and the sentence splitter (is_abbreviation, given the text that
# follows) answer alike (words._expands_here). Elsewhere the word is itself and its period may
# end the sentence.
WORD_TITLES = frozenset(("rev.", "gen.", "col.", "gov.", "sen.", "rep.", "hon."))  # before a capitalised name
DATE_ABBREV = {**MONTH_ABBREV, **_DAY_ABBREV}  # capitalised ("Sat.", "Mar."), or before a number
WORD_BEFORE_NUMBER = {"fig.": "figure", "vol.": "volume", "ch.": "chapter", "est.": "established",
                       "pp.": "pages", "nos.": "numbers"}  # "Fig. 3", "vol. 2"
WORD_AFTER_NUMBER = frozenset(("min.", "sec.", "hr.", "hrs.", "ft.", "lb.", "lbs.", "oz."))  # "5 min.": units
WORD_LIKE = WORD_TITLES | frozenset(DATE_ABBREV) | frozenset(WORD_BEFORE_NUMBER) | WORD_AFTER_NUMBER

ABBREVIATIONS = (frozenset(TITLES) | frozenset(INLINE) | frozenset(MAY_END) | frozenset(BEFORE_NUMBER)
                  | WORD_LIKE)

DIGIT_BY_DIGIT = frozenset(("911",))  # the emergency number, as said
ABOUT_WORDS = frozenset(("about", "approx", "approximately", "around", "roughly", "circa", "ca"))
# A five-digit number after a US state's code is a ZIP code, read digit by digit ("IL 62704")
US_STATES = frozenset(
    "AL AK AZ AR CA CO CT DE FL GA ID IL IA KS KY LA MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND "
    "OH PA RI SC SD TN TX UT VT VA WA WV WI WY DC PR".split())  # not HI, IN, ME, OK, OR: words too
# A four-digit number after these is a year, even out of 1100-2099 ("in 1066", "by 2150")
YEAR_AFTER = frozenset("in since until till by circa ca. c. year around before after from".split())
# Tokens read as a whole ("C hash" otherwise)
NAMED_TOKENS = {"C#": "C sharp", "F#": "F sharp", "C++": "C plus plus", "vs": "versus", "Vs": "versus",
                 "WWI": "World War One", "WWII": "World War Two", "WW1": "World War One", "WW2": "World War Two"}
# Month and day abbreviations without their period, read out before a number or in a range
# ("Jan 5", "Mon-Fri"); alone they stay as written ("Jan" may be a name)
BARE_DATE_ABBREV = {k[:-1].capitalize(): v for k, v in {**MONTH_ABBREV, **_DAY_ABBREV}.items()}
# Units read as such only when written against the number ("24h", "2in"; "5 in a row" is a word)
ATTACHED_UNITS = {"h": ("hour", "hours"), "in": ("inch", "inches"), "yr": ("year", "years"),
                   "yrs": ("years", "years")}
# Video resolutions ("1080p"): read as said, "ten eighty p"
RE_RESOLUTION = re.compile(r"(?P<n>480|576|720|1080|1440|2160|4320)(?P<s>[pi])")
SCALE_WORDS = {"thousand", "million", "billion", "trillion"}
SCALE_SUFFIX = {"k": "thousand", "K": "thousand", "m": "million", "M": "million",
                 "mn": "million", "bn": "billion", "b": "billion", "B": "billion",
                 "tn": "trillion", "T": "trillion"}
SCALE_SUFFIX.update({w: w for w in SCALE_WORDS})

# symbol: (singular, plural, minor singular, minor plural)
CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "\u00a3": ("pound", "pounds", "penny", "pence"),
    "\u20ac": ("euro", "euros", "cent", "cents"),
    "\u00a5": ("yen", "yen", None, None),
    "\u20b9": ("rupee", "rupees", "paisa", "paise"),
    "\u20a9": ("won", "won", None, None),
    "\u20bd": ("ruble", "rubles", "kopek", "kopeks"),
    "\u20bf": ("bitcoin", "bitcoins", None, None),
    "\u00a2": ("cent", "cents", None, None),
}
_CUR_CLASS = "[" + re.escape("".join(CURRENCIES)) + "]"

# unit as written -> (singular, plural); only read so after a number
UNITS = {
    "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "mi": ("mile", "miles"), "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"), "lbs": ("pounds", "pounds"), "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"),
    "mph": ("mile per hour", "miles per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "\u00b0C": ("degree Celsius", "degrees Celsius"), "\u00b0F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "\u00b0": ("degree", "degrees"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "KB": ("kilobyte", "kilobytes"), "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"),
    "ms": ("millisecond", "milliseconds"), "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "mAh": ("milliamp hour", "milliamp hours"),
    "min": ("minute", "minutes"), "sec": ("second", "seconds"), "hr": ("hour", "hours"),
    "hrs": ("hours", "hours"),
}
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))

ROMAN_RE = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
# "Chapter IV" -> "chapter four" after these words; after other capitalised words
# ("Henry VIII") a numeral up to MAX_REGNAL reads "the eighth".
ROMAN_CARDINAL_AFTER = frozenset(
    "chapter ch part volume vol book act scene section article appendix war phase type class "
    "level stage episode round grade unit table figure fig season series".split()
    # sequels, missions, models, councils: "Apollo XI", "Super Bowl XL", "Rocky II", "Mark IV"
    + "apollo gemini rocky bowl fantasy mark vatican council olympiad".split())
MAX_REGNAL = 39
# "I" after a name is read "the first" only after these names, and not before these words.
REGNAL_NAMES = frozenset(
    "Elizabeth Henry Charles George Edward William James Richard John Mary Louis Peter Catherine "
    "Frederick Philip Alexander Nicholas Ferdinand Victoria Anne Leopold Pius Paul Gregory Leo "
    "Benedict Clement Boniface Urban Otto Wilhelm Alfonso Carlos Juan Ivan Constantine Justinian "
    "Selim Suleiman Mehmed Darius Ramesses Rudolf Sigismund Casimir Stephen Robert David Malcolm "
    "Harold Matilda Isabella Olaf Haakon Gustav Christian Umberto Napoleon Francis Joseph Maximilian "
    "Augustus Ptolemy Cyrus Xerxes Artaxerxes Innocent Sixtus Julius Hadrian Manuel Pedro Sancho".split())
AFTER_PRONOUN_I = frozenset(
    "am think know guess mean hope believe said say thought have had will would can could do did "
    "don't didn't can't won't need want see saw like love feel felt went go".split())

TLDS = frozenset("com org net edu gov io co uk de fr ai dev app info biz us ca au jp cn ru nl "
                  "eu me tv ly gg be ch es it se no fi pl in".split())

# --------------------------------------------------------------------------- patterns

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
AMPM = r"(?P<ampm>[aApP]\.?[mM]\.?)"
RE_CUR_PRE = re.compile(
    rf"(?P<sign>[-+]?)(?P<cur>{_CUR_CLASS})(?P<num>{_NUM})(?P<scale>[kKmMbBT]|mn|bn|tn|"
    r"thousand|million|billion|trillion)?")
RE_CUR_POST = re.compile(
    rf"(?P<sign>[-+]?)(?P<num>{_NUM})(?P<scale>[kKmMbBT]|mn|bn|tn)?(?P<cur>{_CUR_CLASS})")
RE_PERCENT = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})%")
RE_TIME_AMPM = re.compile(rf"(?P<h>\d{{1,2}})(?::(?P<m>\d{{2}}))?{AMPM}")
RE_TIME = re.compile(r"(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2}))?")
RE_ISO_DATE = re.compile(r"(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})")
RE_SLASH_DATE = re.compile(r"(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})")
RE_DECADE = re.compile(r"'?(?P<n>\d{1,3}0)'?s")
RE_POSSESSIVE = re.compile(r"(?P<num>\d+)'s")
RE_ORDINAL = re.compile(r"(?P<n>\d{1,3}(?:,\d{3})+|\d+)(?P<suf>st|nd|rd|th|ST|ND|RD|TH)")
RE_PHONE = re.compile(r"(?P<plus>\+?)\d+(?:[-.]\d+)+")
RE_PHONE_PAREN = re.compile(r"\(?(?P<a>\d{3})\)(?P<b>\d{3})-(?P<c>\d{4})")
RE_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
RE_RANGE = re.compile(rf"(?P<a>{_NUM})[-\u2013](?P<b>{_NUM})")
RE_FRACTION = re.compile(r"(?:(?P<whole>\d+)?(?P<mark>_))?(?P<a>\d+)/(?P<b>\d+)")
RE_PER = re.compile(r"(?P<amount>[^/]*\d[^/]*)/(?P<per>[A-Za-z]+)")
RE_SHORT_YEAR = re.compile(r"'(?P<y>\d\d)")
# Denominators read as a fraction even where the numbers could be a month and a day
# ("3/4" three quarters, "5/16"); other month/day pairs are dates ("6/30" June thirtieth).
COMMON_DENOMINATORS = frozenset((2, 3, 4, 5, 6, 8, 10, 16, 32, 64, 100))
# "$5/month", "60 km/h": the word after the slash, read after "per"
PER_WORDS = {"hr": "hour", "h": "hour", "mo": "month", "yr": "year", "wk": "week", "min": "minute",
              "sec": "second", "s": "second", "d": "day", "ea": "each"}
RE_NUM_UNIT = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})(?P<unit>{_UNIT_ALT})")
RE_NUMBER = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})")
# "5M users", "2.5bn people": a scale letter with no currency ("M", "mn", "bn", "tn"; a lower-case
# "m" is meters, "5k" and "2B" stay as written: "ten K run", "a 2B pencil")
RE_NUM_SCALE = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_NUM})(?P<scale>M|mn|bn|tn)")
# European number formats, rewritten to English ones before reading: a decimal comma ("1,5",
# "12,50 €", not the English "1,500"), dots grouping thousands ("1.234,56", "1.234.567"), and
# day.month.year dates ("12.01.2026")
RE_EURO_NUMBER = re.compile(
    r"(?P<head>\D*?)(?P<int>\d{1,3}(?:\.\d{3})+|\d+)(?:,(?P<frac>\d{1,2}|\d{4,}))?(?P<tail>\D*)")
RE_DOTTED_DATE = re.compile(r"(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})")
RE_YMD_SLASH = re.compile(r"(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})")  # "2026/01/12"
RE_DASH_DATE = re.compile(r"(?P<a>\d{1,2})-(?P<b>\d{1,2})-(?P<y>\d{4})")  # "12-01-2026", as slash dates
RE_TIMES = re.compile(rf"(?P<num>{_NUM})[x\u00d7]")  # "3x faster"
RE_BY = re.compile(r"(?P<a>\d+)[x\u00d7](?P<b>\d+)")  # "1920x1080", "2x4"
RE_POWER = re.compile(r"(?P<a>\d+)\^(?P<b>-?\d+)")  # "10^6"
RE_NUM_PLUS = re.compile(rf"(?P<num>{_NUM})\+")  # "10,000+"
RE_NUM_ATTACHED = re.compile(rf"(?P<num>{_NUM})(?P<unit>[a-z]+)")  # "24h", "2in" (ATTACHED_UNITS)
RE_PREFIXED_YEAR = re.compile(r"(?P<p>[A-Z]{1,3})(?P<y>1[1-9]\d\d|20\d\d)")  # "FY2024", "RTX2080"
RE_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
RE_DOMAIN = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?P<tld>[A-Za-z]{2,4})(?:[/:?#]\S*)?")
RE_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
RE_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]?\.?")

URL_SEPARATORS = {".": "dot", "/": "slash", "-": "dash", "_": "underscore", ":": "colon",
                   "@": "at", "?": "question mark", "=": "equals", "&": "and", "#": "hash",
                   "%": "percent", "~": "tilde", "+": "plus"}


